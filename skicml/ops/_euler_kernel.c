/*
 * C kernel of skicml::euler_serialize (see skicml/ops/_euler.py).
 *
 * Plain C99 with no Python or torch headers: _euler.py compiles it on first
 * use with the system compiler and calls it through ctypes, once per batch.
 * The algorithm and, above all, the order of the random draws must stay in
 * lock-step with the Python reference (module docstring of _euler.py); the
 * tests compare the two exactly.
 *
 * Inputs are validated in Python: node ids are local and in range, every
 * graph has at least one node, the offsets are monotone. The output buffers
 * hold at least sum over graphs of (E_g + n_g) rows, the most a graph can
 * produce.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z;
    *state += 0x9E3779B97F4A7C15ULL;
    z = *state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static int64_t rand_index(uint64_t *state, int64_t k)
{
    return (int64_t)(splitmix64(state) % (uint64_t)k);
}

static void shuffle(int64_t *items, int64_t count, uint64_t *state)
{
    int64_t i, j, tmp;
    for (i = count - 1; i >= 1; --i) {
        j = rand_index(state, i + 1);
        tmp = items[i];
        items[i] = items[j];
        items[j] = tmp;
    }
}

/* Work space for the largest graph of the batch, reused by every graph. */
typedef struct {
    int64_t *perm, *off, *fill, *nbr, *eid;
    int64_t *comp_order, *comp_start, *comp_perm;
    int64_t *tree_order, *parent, *pedge;
    int64_t *dup_edge, *dup_nbr, *dup_next, *dup_head, *dup_tail, *dup_cursor, *cursor;
    int64_t *stack_node, *stack_edge, *circ_node, *circ_edge;
    char *visited, *tree_visited, *parity, *used, *covered;
} Work;

static void *grab(void **slots, int *n_slots, size_t bytes)
{
    /* +1 so that a zero-sized request still returns a pointer to free. */
    void *p = malloc(bytes + 1);
    slots[(*n_slots)++] = p;
    return p;
}

#define N_SLOTS 32

static int work_alloc(Work *w, void **slots, int *n_slots, int64_t max_n, int64_t max_e)
{
    size_t n = (size_t)max_n, e = (size_t)max_e, i8 = sizeof(int64_t);
    size_t steps = e + n + 1; /* pushes in Hierholzer: E_c + D_c + 1 */
    int k;
    w->perm = grab(slots, n_slots, e * i8);
    w->off = grab(slots, n_slots, (n + 1) * i8);
    w->fill = grab(slots, n_slots, n * i8);
    w->nbr = grab(slots, n_slots, 2 * e * i8);
    w->eid = grab(slots, n_slots, 2 * e * i8);
    w->comp_order = grab(slots, n_slots, n * i8);
    w->comp_start = grab(slots, n_slots, (n + 1) * i8);
    w->comp_perm = grab(slots, n_slots, n * i8);
    w->tree_order = grab(slots, n_slots, n * i8);
    w->parent = grab(slots, n_slots, n * i8);
    w->pedge = grab(slots, n_slots, n * i8);
    w->dup_edge = grab(slots, n_slots, n * i8);
    w->dup_nbr = grab(slots, n_slots, 2 * n * i8);
    w->dup_next = grab(slots, n_slots, 2 * n * i8);
    w->dup_head = grab(slots, n_slots, n * i8);
    w->dup_tail = grab(slots, n_slots, n * i8);
    w->dup_cursor = grab(slots, n_slots, n * i8);
    w->cursor = grab(slots, n_slots, n * i8);
    w->stack_node = grab(slots, n_slots, steps * i8);
    w->stack_edge = grab(slots, n_slots, steps * i8);
    w->circ_node = grab(slots, n_slots, steps * i8);
    w->circ_edge = grab(slots, n_slots, steps * i8);
    w->visited = grab(slots, n_slots, n);
    w->tree_visited = grab(slots, n_slots, n);
    w->parity = grab(slots, n_slots, n);
    w->used = grab(slots, n_slots, e + n);
    w->covered = grab(slots, n_slots, e);
    for (k = 0; k < *n_slots; ++k)
        if (slots[k] == NULL)
            return -1;
    return 0;
}

/* Append duplicate slot s (neighbour `other`) to v's duplicate list. */
static void dup_append(Work *w, int64_t v, int64_t s, int64_t other)
{
    w->dup_nbr[s] = other;
    w->dup_next[s] = -1;
    if (w->dup_tail[v] < 0)
        w->dup_head[v] = s;
    else
        w->dup_next[w->dup_tail[v]] = s;
    w->dup_tail[v] = s;
}

/*
 * One graph with n nodes and E edges (src/dst local ids). Writes its rows to
 * out_nodes/out_edges and returns how many.
 */
static int64_t serialize_graph(Work *w, int64_t n, int64_t E, const int64_t *src,
                               const int64_t *dst, uint64_t seed, int64_t *out_nodes,
                               int64_t *out_edges)
{
    uint64_t state = seed;
    int64_t i, k, v, x, e, pos, head, n_comp, rows = 0, n_dup = 0;

    /* 1. Shuffled edge order, and adjacency lists (CSR) filled in that order. */
    for (i = 0; i < E; ++i)
        w->perm[i] = i;
    shuffle(w->perm, E, &state);
    memset(w->off, 0, (size_t)(n + 1) * sizeof(int64_t));
    for (e = 0; e < E; ++e) {
        w->off[src[e] + 1]++;
        w->off[dst[e] + 1]++;
    }
    for (v = 0; v < n; ++v) {
        w->off[v + 1] += w->off[v];
        w->fill[v] = w->off[v];
    }
    for (i = 0; i < E; ++i) {
        int64_t a, b;
        e = w->perm[i];
        a = src[e];
        b = dst[e];
        w->nbr[w->fill[a]] = b;
        w->eid[w->fill[a]++] = e;
        w->nbr[w->fill[b]] = a;
        w->eid[w->fill[b]++] = e;
    }

    /* 2. Components by BFS from nodes in index order; then their order shuffled. */
    memset(w->visited, 0, (size_t)n);
    pos = 0;
    n_comp = 0;
    for (x = 0; x < n; ++x) {
        if (w->visited[x])
            continue;
        w->comp_start[n_comp] = pos;
        w->visited[x] = 1;
        w->comp_order[pos++] = x;
        for (head = w->comp_start[n_comp]; head < pos; ++head) {
            v = w->comp_order[head];
            for (i = w->off[v]; i < w->off[v + 1]; ++i) {
                if (!w->visited[w->nbr[i]]) {
                    w->visited[w->nbr[i]] = 1;
                    w->comp_order[pos++] = w->nbr[i];
                }
            }
        }
        w->comp_perm[n_comp] = n_comp;
        n_comp++;
    }
    w->comp_start[n_comp] = pos;
    shuffle(w->comp_perm, n_comp, &state);

    memset(w->tree_visited, 0, (size_t)n);
    memset(w->used, 0, (size_t)(E + n));
    memset(w->covered, 0, (size_t)E);
    for (v = 0; v < n; ++v) {
        w->dup_head[v] = -1;
        w->dup_tail[v] = -1;
    }

    for (k = 0; k < n_comp; ++k) {
        int64_t c = w->comp_perm[k];
        const int64_t *verts = w->comp_order + w->comp_start[c];
        int64_t size = w->comp_start[c + 1] - w->comp_start[c];
        int64_t first = rows == 0 ? -1 : -2;
        int64_t degree_sum = 0, remaining, root, start, tree_len, sp, clen;

        for (i = 0; i < size; ++i)
            degree_sum += w->off[verts[i] + 1] - w->off[verts[i]];
        if (degree_sum == 0) {
            out_nodes[rows] = verts[0];
            out_edges[rows++] = first;
            continue;
        }
        remaining = degree_sum / 2;

        /* 3a-b. BFS spanning tree from a random root. */
        root = verts[rand_index(&state, size)];
        w->tree_visited[root] = 1;
        w->tree_order[0] = root;
        tree_len = 1;
        for (head = 0; head < tree_len; ++head) {
            v = w->tree_order[head];
            for (i = w->off[v]; i < w->off[v + 1]; ++i) {
                x = w->nbr[i];
                if (!w->tree_visited[x]) {
                    w->tree_visited[x] = 1;
                    w->parent[x] = v;
                    w->pedge[x] = w->eid[i];
                    w->tree_order[tree_len++] = x;
                }
            }
        }

        /* 3c. T-join: fix odd vertices from the leaves up. */
        for (i = 0; i < size; ++i) {
            v = verts[i];
            w->parity[v] = (char)((w->off[v + 1] - w->off[v]) & 1);
        }
        for (i = tree_len - 1; i >= 1; --i) {
            v = w->tree_order[i];
            if (w->parity[v]) {
                int64_t p = w->parent[v];
                w->dup_edge[n_dup] = w->pedge[v];
                dup_append(w, v, 2 * n_dup, p);
                dup_append(w, p, 2 * n_dup + 1, v);
                n_dup++;
                w->parity[v] = 0;
                w->parity[p] ^= 1;
            }
        }

        /* 3d-e. Hierholzer from a random start; originals before duplicates. */
        start = verts[rand_index(&state, size)];
        for (i = 0; i < size; ++i) {
            v = verts[i];
            w->cursor[v] = w->off[v];
            w->dup_cursor[v] = w->dup_head[v];
        }
        w->stack_node[0] = start;
        w->stack_edge[0] = -1;
        sp = 1;
        clen = 0;
        while (sp > 0) {
            int64_t end, s;
            v = w->stack_node[sp - 1];
            i = w->cursor[v];
            end = w->off[v + 1];
            while (i < end && w->used[w->eid[i]])
                ++i;
            w->cursor[v] = i;
            if (i < end) {
                w->used[w->eid[i]] = 1;
                w->stack_node[sp] = w->nbr[i];
                w->stack_edge[sp++] = w->eid[i];
                continue;
            }
            s = w->dup_cursor[v];
            while (s >= 0 && w->used[E + s / 2])
                s = w->dup_next[s];
            w->dup_cursor[v] = s;
            if (s >= 0) {
                w->used[E + s / 2] = 1;
                w->stack_node[sp] = w->dup_nbr[s];
                w->stack_edge[sp++] = w->dup_edge[s / 2];
                continue;
            }
            /* Popped vertices form the circuit backwards, each with the edge
               that joins it to its predecessor once reversed. */
            --sp;
            w->circ_node[clen] = w->stack_node[sp];
            w->circ_edge[clen++] = w->stack_edge[sp];
        }

        /* Emit the circuit, cut after the last original edge is covered. */
        out_nodes[rows] = start;
        out_edges[rows++] = first;
        for (i = clen - 2; i >= 0 && remaining > 0; --i) {
            e = w->circ_edge[i];
            out_nodes[rows] = w->circ_node[i];
            out_edges[rows++] = e;
            if (!w->covered[e]) {
                w->covered[e] = 1;
                remaining--;
            }
        }
    }
    return rows;
}

/*
 * Serialize G graphs. Returns the total number of rows, or -1 when the work
 * space cannot be allocated. step_ptr receives G+1 offsets.
 */
int64_t euler_serialize_batch(int64_t G, const int64_t *src, const int64_t *dst,
                              const int64_t *edge_ptr, const int64_t *node_ptr,
                              const int64_t *seeds, int64_t *out_nodes, int64_t *out_edges,
                              int64_t *step_ptr)
{
    void *slots[N_SLOTS];
    int n_slots = 0, k, status;
    int64_t g, max_n = 0, max_e = 0, rows = 0;
    Work w;

    for (g = 0; g < G; ++g) {
        int64_t n = node_ptr[g + 1] - node_ptr[g], e = edge_ptr[g + 1] - edge_ptr[g];
        if (n > max_n)
            max_n = n;
        if (e > max_e)
            max_e = e;
    }
    status = work_alloc(&w, slots, &n_slots, max_n, max_e);
    step_ptr[0] = 0;
    for (g = 0; status == 0 && g < G; ++g) {
        int64_t lo = edge_ptr[g];
        rows += serialize_graph(&w, node_ptr[g + 1] - node_ptr[g], edge_ptr[g + 1] - lo,
                                src + lo, dst + lo, (uint64_t)seeds[g], out_nodes + rows,
                                out_edges + rows);
        step_ptr[g + 1] = rows;
    }
    for (k = 0; k < n_slots; ++k)
        free(slots[k]);
    return status == 0 ? rows : -1;
}
