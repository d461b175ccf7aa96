import sys

from moagcn.cli.main import main

sys.exit(main())
