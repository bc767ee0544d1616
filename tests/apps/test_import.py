"""The library stays apart from its applications: ``import mindspore_rl_buffer`` imports no app,
and neither of the ``dqn`` extra's packages."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Run in a fresh interpreter from the repository root (so this checkout's package is the one
# imported). MindSpore itself imports tqdm when it is installed (optionally, for a metric), so
# the probe imports MindSpore first, forgets tqdm and matplotlib, and then records every
# attempt to import either while mindspore_rl_buffer is imported.
PROBE = """
import json, sys
import mindspore
for name in [m for m in sys.modules if m.split('.')[0] in ('tqdm', 'matplotlib')]:
    del sys.modules[name]
attempts = []
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('tqdm', 'matplotlib'):
            attempts.append(name)
        return None
sys.meta_path.insert(0, Watch())
import mindspore_rl_buffer
print(json.dumps({'file': mindspore_rl_buffer.__file__, 'attempts': attempts,
                  'extras': sorted(m for m in sys.modules if m.split('.')[0] in ('tqdm', 'matplotlib')),
                  'apps': sorted(m for m in sys.modules if m.startswith('mindspore_rl_buffer.apps'))}))
"""


def test_importing_the_library_imports_no_app_and_no_dqn_extra():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(report["file"]).resolve().parent == ROOT / "mindspore_rl_buffer"
    assert report["attempts"] == [] and report["extras"] == []
    assert report["apps"] == []
