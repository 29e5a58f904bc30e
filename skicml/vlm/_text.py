"""Word-level tokenization for :class:`TinyVLM`'s small closed vocabulary."""

from __future__ import annotations

import re

import torch

__all__ = ["DEFAULT_PROMPT", "SPECIAL_TOKENS", "WordTokenizer", "encode_captions", "scene_vocabulary"]

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
#: The instruction the shipped TinyVLM is trained to follow.
DEFAULT_PROMPT = "describe the image in detail :"
_WORD = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")


class WordTokenizer:
    """Lower-cased words and punctuation marks as tokens, over a fixed vocabulary.

    Parameters
    ----------
    vocabulary : sequence of str
        Starts with :data:`SPECIAL_TOKENS`; the rest are words.

    Examples
    --------
    >>> from skicml.vlm._text import WordTokenizer
    >>> tokenizer = WordTokenizer.from_texts(["a red circle, to its right a blue square"])
    >>> tokenizer.decode(tokenizer.encode("A red square, a circle"))
    'a red square, a circle'
    """

    def __init__(self, vocabulary):
        self.vocabulary = list(vocabulary)
        if tuple(self.vocabulary[:4]) != SPECIAL_TOKENS:
            raise ValueError(f"vocabulary must start with {SPECIAL_TOKENS}; got {self.vocabulary[:4]}.")
        self.index = {word: i for i, word in enumerate(self.vocabulary)}
        if len(self.index) != len(self.vocabulary):
            raise ValueError("vocabulary holds a word twice.")
        self.pad_token_id, self.bos_token_id, self.eos_token_id, self.unk_token_id = 0, 1, 2, 3

    @classmethod
    def from_texts(cls, texts, extra=()):
        words = sorted({w for text in texts for w in _WORD.findall(text.lower())} | set(extra))
        return cls(list(SPECIAL_TOKENS) + [w for w in words if w not in SPECIAL_TOKENS])

    @staticmethod
    def words(text):
        return _WORD.findall(text.lower())

    def encode(self, text):
        return [self.index.get(word, self.unk_token_id) for word in self.words(text)]

    def unknown_words(self, text):
        return sorted({word for word in self.words(text) if word not in self.index})

    def decode(self, token_ids):
        words = []
        for i in token_ids:
            i = int(i)
            if i == self.eos_token_id:
                break
            if i in (self.pad_token_id, self.bos_token_id):
                continue
            words.append(self.vocabulary[i])
        text = " ".join(words)
        return re.sub(r" ([^\sa-z0-9<>])", r"\1", text)

    def __len__(self):
        return len(self.vocabulary)


def encode_captions(tokenizer, prompts, captions):
    """Training rows ``<bos> prompt caption <eos>``, right-padded, for teacher-forced caption losses.

    Parameters
    ----------
    tokenizer : WordTokenizer
    prompts : str or sequence of str
        One prompt for all captions, or one each.
    captions : sequence of str

    Returns
    -------
    ids : LongTensor of shape (n, width)
        Token ids, 0 (``<pad>``) past each row's end.
    mask : BoolTensor of shape (n, width)
        The real tokens.
    target : BoolTensor of shape (n, width)
        The tokens a caption loss predicts: the caption's and the end token.
    """
    prompts = [prompts] * len(captions) if isinstance(prompts, str) else list(prompts)
    rows, starts = [], []
    for prompt, caption in zip(prompts, captions):
        prefix = [tokenizer.bos_token_id] + tokenizer.encode(prompt)
        rows.append(prefix + tokenizer.encode(caption) + [tokenizer.eos_token_id])
        starts.append(len(prefix))
    width = max(map(len, rows))
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.as_tensor(row)
    positions = torch.arange(width)
    lengths, starts = torch.as_tensor([len(r) for r in rows]), torch.as_tensor(starts)
    mask = positions < lengths[:, None]
    return ids, mask, (positions >= starts[:, None]) & mask


def scene_vocabulary(prompt=DEFAULT_PROMPT):
    """Every word a :func:`skicml.datasets.make_object_scenes` caption or ``prompt`` can hold.

    The vocabulary of the shipped TinyVLM, for building one of your own on
    the same scenes.

    Parameters
    ----------
    prompt : str, default="describe the image in detail :"

    Returns
    -------
    list of str
        :data:`SPECIAL_TOKENS` first, then the words in sorted order.

    Examples
    --------
    >>> from skicml.vlm import scene_vocabulary
    >>> scene_vocabulary()[:6]
    ['<pad>', '<bos>', '<eos>', '<unk>', ',', ':']
    """
    from ..datasets import make_object_scenes, object_classes

    _, captions, _ = make_object_scenes(3000, random_state=0)
    words = [w for name in object_classes() for w in name.split()] + ["small", "large"]
    return WordTokenizer.from_texts(list(captions) + [prompt], extra=words).vocabulary
