"""GIT (Wang et al., ICML 2025): a graph foundation model over task-trees. Work in progress (issue 35)."""
