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

The package exports the public names of the first four and of text and tagged (``from fsmlearn.data
import iter_sentences``).  It imports nothing from fsmlearn but
:mod:`fsmlearn.errors`.
"""

from .datasets import (BROWN_LM_VOCAB_SIZE, DATASETS, SPLITS, TAGGED_DATASETS, UNK, brown_lm_vocabulary,
                       dataset_fileids, iter_dataset_words, iter_sentences, iter_wsj_tagged, load_dataset, load_tagged, token_count)
from .locate import CORPORA, TEXT_CORPORA, corpus_path, data_dir, fileids
from .readers import (iter_brown, iter_conll2000, iter_conllu, iter_masc, iter_text, iter_treebank,
                      iter_words, unescape_ptb)
from .tagged import OUTPUT_FORMATS, TAGGED_FORMATS, format_tagged, read_tagged_file, tagged_format, tags_of
from .text import iter_lines, iter_strict_lines, open_text
from .tokenise import split_sentences, tokenize

__all__ = ["CORPORA", "TEXT_CORPORA", "DATASETS", "SPLITS", "BROWN_LM_VOCAB_SIZE", "UNK",
           "data_dir", "corpus_path", "fileids", "iter_treebank", "iter_conll2000", "iter_masc",
           "iter_brown", "iter_conllu", "iter_text", "iter_words", "tokenize", "split_sentences",
           "unescape_ptb", "iter_sentences", "iter_dataset_words", "load_dataset", "load_tagged", "TAGGED_DATASETS", "token_count", "dataset_fileids",
           "brown_lm_vocabulary", "iter_wsj_tagged", "open_text", "iter_lines",
           "iter_strict_lines", "TAGGED_FORMATS", "OUTPUT_FORMATS", "tagged_format", "read_tagged_file",
           "tags_of", "format_tagged"]
