"""``python -m neardup_spark`` is the ``neardup`` command."""

import sys

from neardup_spark.cli.app import main

sys.exit(main())
