"""``neardup fingerprint``: the seed article's worked examples from the command line."""

from __future__ import annotations

from neardup_spark.cli import main
from neardup_spark.kernels.exact_fingerprint import exact_fingerprint, to_hex

D1 = "the crawler fetches each page and follows its links to new pages"


def test_fingerprint_command_reproduces_the_seed(capsys):
    assert main(["fingerprint", "--method", "simhash", "--hash", "md5", D1]) == 0
    assert capsys.readouterr().out.strip() == "93264c674404019d"
    assert (
        main(["fingerprint", "--hash", "md5", D1.replace("each", "every").replace("new", "other")])
        == 0
    )
    assert capsys.readouterr().out.strip() == "91060e274484039d"


def test_fingerprint_command_other_methods(capsys):
    assert main(["fingerprint", "--method", "exact", "The  Crawler!"]) == 0
    assert capsys.readouterr().out.strip() == to_hex(exact_fingerprint("the crawler"))
    assert main(["fingerprint", "--method", "minhash", D1]) == 0
    out = capsys.readouterr().out
    assert "8 distinct word 5-shingles" in out and "28 bands x 7 rows" in out
    assert main(["fingerprint", "--method", "bogus", D1]) == 2
