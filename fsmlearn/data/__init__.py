"""Layer 1 (beside fsm/): corpora, tokenising, tag sets and the named splits; knows no model.

Modules:

- :mod:`.locate`: the data folder, the corpus files and reading them in place.
- :mod:`.readers`: one sentence reader per corpus format (Treebank, CoNLL-2000,
  MASC, Brown, CoNLL-U, raw text).
- :mod:`.tokenise`: the tokeniser and sentence splitter for raw text.
- :mod:`.datasets`: the named datasets and splits of ``../shared/data/README.md``.
- :mod:`.tagsets`: the Penn and 17-tag sets and the tag dictionary.
- :mod:`.text`: a user's text files (compressed by extension), line by line.
- :mod:`.tagged`: a user's tagged files (``word/TAG``, CoNLL-U) and tagged output.
- :mod:`.textin`: text named on the command line (files or stdin), with errors naming the file.

The package exports the public names of the first four and of text and tagged (``from fsmlearn.data
import iter_sentences``), imported on first use.  It imports nothing from fsmlearn but
:mod:`fsmlearn.errors`.
"""

from .._lazy import lazy_exports

#: public name -> the module that defines it, imported on first use (PEP 562): a command that
#: reads one user's file does not import every corpus reader
_LAZY = {
    "BROWN_LM_VOCAB_SIZE": "datasets",
    "DATASETS": "datasets",
    "SPLITS": "datasets",
    "TAGGED_DATASETS": "datasets",
    "UNK": "datasets",
    "brown_lm_vocabulary": "datasets",
    "dataset_fileids": "datasets",
    "iter_dataset_words": "datasets",
    "iter_sentences": "datasets",
    "iter_wsj_tagged": "datasets",
    "load_dataset": "datasets",
    "load_tagged": "datasets",
    "token_count": "datasets",
    "CORPORA": "locate",
    "TEXT_CORPORA": "locate",
    "corpus_path": "locate",
    "data_dir": "locate",
    "fileids": "locate",
    "iter_brown": "readers",
    "iter_conll2000": "readers",
    "iter_conllu": "readers",
    "iter_masc": "readers",
    "iter_text": "readers",
    "iter_treebank": "readers",
    "iter_words": "readers",
    "unescape_ptb": "readers",
    "OUTPUT_FORMATS": "tagged",
    "TAGGED_FORMATS": "tagged",
    "format_tagged": "tagged",
    "read_tagged_file": "tagged",
    "tagged_format": "tagged",
    "tags_of": "tagged",
    "iter_lines": "text",
    "iter_strict_lines": "text",
    "open_text": "text",
    "split_sentences": "tokenise",
    "tokenize": "tokenise",
}

_MODULES = ("datasets", "locate", "readers", "tagged", "text", "textin", "tokenise", "tagsets", "cmudict", "speech")

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), _MODULES)
