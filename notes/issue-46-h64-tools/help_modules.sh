.venv/bin/python -c "
import sys
from microcoder.launch.cli.main import build_parser; build_parser()
print('\n'.join(sorted(sys.modules)))"
