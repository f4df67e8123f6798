"""torchrun (python3 -m torch.distributed.run) from Debian's python3-torch 1.13, mended for Python 3.11.

On 3.11 iterating an IntFlag leaves out its zero and composite members, so torch 1.13's Std.from_str("0")
(the default of --redirects and --tee) returns None and torchrun fails before it starts anything. This
replaces that one function and runs torchrun unchanged; the arguments are torchrun's.
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api


def _std_from_str(vm):
    if re.fullmatch(r"[0-3]", vm):
        return api.Std(int(vm))
    if re.fullmatch(r"(\d+:[0-3],)*\d+:[0-3]", vm):
        return {int(i): api.Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{api._VALUE_REGEX}> or <{api._MAPPING_REGEX}>")


api.Std.from_str = staticmethod(_std_from_str)

from torch.distributed.run import main  # noqa: E402  (after the mend: run.py reads Std at import)

if __name__ == "__main__":
    sys.exit(main())
