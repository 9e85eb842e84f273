import sys

from kspec.cli import main

sys.exit(main())
