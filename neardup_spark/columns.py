"""Column names shared by the stages and the output contract: plain names, used as they are.
The input's own names (id, text, --prefer and carried columns) may hold anything; they meet
Spark through :mod:`neardup_spark.stages.names`."""

# Output contract (clusters/, pairs/)
DOC_ID = "doc_id"
CLUSTER_ID = "cluster_id"
IS_REPRESENTATIVE = "is_representative"
DOC_A = "doc_a"
DOC_B = "doc_b"
METHOD = "method"
SIMILARITY = "similarity"
JACCARD = "jaccard"
ESTIMATE = "estimate"
HAMMING = "hamming"
CONTAINMENT = "containment"  # pairs/ under --similarity containment

# Internal, between stages
TEXT = "text"
TEXT_IS_NULL = "text_is_null"
N_CHARS = "n_chars"
N_WORDS = "n_words"
N_SHINGLES = "n_shingles"
SHINGLES = "shingles"  # sorted uint64 shingle hashes, little-endian bytes
SKETCH = "sketch"  # uint32 MinHash values, little-endian bytes
BAND_KEYS = "band_keys"  # one int64 per band
BAND_KEY = "band_key"
COMPONENT = "component"
HAS_TEXT = "has_text"
EXACT_FP = "exact_fp"
NORMALIZED = "normalized"
SIMHASH = "simhash"
CHAR_UNIT = "char_unit"  # the document is shingled by characters
REPLACED_BYTES = "replaced_bytes"  # invalid UTF-8 bytes replaced while decoding a binary text

# Boilerplate (neardup boilerplate, dedupe --strip-boilerplate). Output contract:
BOILERPLATE_UNITS = "boilerplate_units"  # units removed from the row's text
BOILERPLATE_CHARS = "boilerplate_chars"  # characters removed from the row's text
# Internal, between the boilerplate stages (prefixed: they travel beside the input's columns).
UNIT_KEY = "__neardup_unit_key"  # int64 key of a unit (its hash, mixed with its group's)
UNIT_DOCS = "__neardup_unit_docs"  # documents holding the unit
KEEPER = "__neardup_keeper"  # repeats: the id of the document whose occurrence stays
GROUP = "__neardup_group"  # the group column as a string
DROP_KEYS = "__neardup_drop_keys"  # keys of the units to remove from this document
UNITS_WITH_WORDS = "__neardup_units"  # units with words in the original text
CHARS = "__neardup_chars"  # characters of the original text
EMPTIED = "__neardup_emptied"  # the text was all boilerplate: now empty
