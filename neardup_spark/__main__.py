"""``python -m neardup_spark`` is the ``neardup`` command."""

import sys

from neardup_spark.cli import main

sys.exit(main())
