import sys

from phrame.cli import main

sys.exit(main())
