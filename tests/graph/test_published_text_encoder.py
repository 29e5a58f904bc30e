"""GIT's text encoder by sentence-transformers name, from a Hugging Face cache laid out on disk.

The cache holds a tiny random sentence-transformers model (a 2-layer BERT with
a 40-word vocabulary, mean pooling) saved in sentence-transformers' own folder
format, as the repository ``sentence-transformers/<model>`` would hold it.
"""

import pickle

import networkx as nx
import numpy as np
import pytest

pytest.importorskip("sentence_transformers", reason="the 'text' extra")

from skicml.graph import GITEncoder, TaskSet  # noqa: E402
from skicml.graph._git._text import SentenceTransformerTextEncoder, resolve_text_encoder  # noqa: E402

NAME = "sentence-transformers/multi-qa-distilbert-cos-v1"
TEXTS = ["carbon atom in an aromatic ring", "oxygen atom in a hydroxyl group", "nitrogen atom in an amine"]


def _save_tiny_model(folder):
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    try:
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # sentence-transformers before 5.x
        from sentence_transformers.models import Pooling, Transformer

    words = sorted({w for text in TEXTS for w in text.split()})
    bert_folder = folder / "bert"
    bert_folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(words) + 5, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=32)).save_pretrained(bert_folder)
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(bert_folder)
    model = SentenceTransformer(modules=[Transformer(str(bert_folder)), Pooling(16, "mean")], device="cpu")
    model.save(str(folder / "model"))
    return model


@pytest.fixture
def cached_model(hub_cache, tmp_path):
    model = _save_tiny_model(tmp_path / "tiny")
    for path in sorted((tmp_path / "tiny" / "model").rglob("*")):
        if path.is_file():
            relative = path.relative_to(tmp_path / "tiny" / "model").as_posix()
            hub_cache.add(NAME, relative, lambda target, path=path: target.write_bytes(path.read_bytes()))
    return model


def test_a_sentence_transformers_name_reads_the_cached_repository(cached_model):
    encoder = resolve_text_encoder(NAME, TEXTS)
    assert isinstance(encoder, SentenceTransformerTextEncoder) and encoder.dim == 16
    expected = cached_model.encode(TEXTS, normalize_embeddings=True)
    np.testing.assert_allclose(encoder.encode(TEXTS), expected, rtol=0, atol=1e-5)
    again = pickle.loads(pickle.dumps(encoder))
    np.testing.assert_allclose(again.encode(TEXTS), expected, rtol=0, atol=1e-5)
    graph = nx.path_graph(6)
    nx.set_node_attributes(graph, {n: TEXTS[n % 3] for n in graph}, "text")
    gitencoder = GITEncoder(text_encoder=NAME, hidden_dim=8, max_epochs=1, random_state=0, device="cpu")
    assert gitencoder.fit(TaskSet(graph)).transform(TaskSet(graph)).shape[0] == 6


def test_an_empty_cache_names_the_download_command(hub_cache):
    with pytest.raises(FileNotFoundError, match=f"skicml download {NAME}"):
        resolve_text_encoder(NAME, TEXTS)
    with pytest.raises(ValueError, match="not a weights file"):
        GITEncoder(pretrained=NAME, device="cpu").fit(TaskSet(nx.path_graph(3)))
