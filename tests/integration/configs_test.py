"""Every shipped profile in configs/ loads, and its keys show up as coming from the config."""
import glob
import os
import sys
import unittest

import yaml

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import run  # noqa: E402

CONFIGS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "configs", "*.yaml")))


class ShippedConfigs(unittest.TestCase):
    def test_there_are_profiles(self):
        names = {os.path.basename(c) for c in CONFIGS}
        for expected in ("workstation.yaml", "slurm-gpu.yaml", "mpi.yaml", "tpu.yaml", "kubernetes.yaml"):
            self.assertIn(expected, names)

    def test_each_profile_loads_and_its_keys_come_from_the_file(self):
        for path in CONFIGS:
            with self.subTest(config=os.path.basename(path)):
                with open(path) as f:
                    keys = yaml.safe_load(f)
                # As on a GPU node: profiles may ask for one worker per GPU.
                r = run(["--dry-run", "--format", "yaml", "--config", path], env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
                self.assertEqual(r.returncode, 0, r.stderr)
                doc = yaml.safe_load(r.stdout)
                for key, value in keys.items():
                    if key == "command":
                        continue
                    option = doc["options"][key.replace("_", "-")]
                    self.assertEqual(option["source"], "config", key)
                self.assertGreaterEqual(len(doc["workers"]), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
