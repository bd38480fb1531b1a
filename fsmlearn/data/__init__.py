"""Layer 5: readers and writers of corpora, ARPA files and Google Web1T counts."""
