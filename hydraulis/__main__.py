"""``python -m hydraulis`` runs the CLI."""

import sys

from hydraulis.cli import main

sys.exit(main())
