import sys

from georep.cli import main

sys.exit(main())
