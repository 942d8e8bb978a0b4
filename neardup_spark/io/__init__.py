"""Storage: reading and checking the corpus, writing outputs (staged, then committed)."""
