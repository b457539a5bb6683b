"""What the GPU suites share: the gate (torch with a CUDA device, else the
skip status 77 with the reason) and the runner that reports every case and
then the status. Imports no torch until asked, so a suite can skip where
torch is not installed."""
import traceback

SKIP = 77


def torch_with_gpu():
    """torch when it is installed and sees a CUDA device; else None, the
    reason printed (the caller exits SKIP)."""
    try:
        import torch
    except ImportError:
        print("SKIP: no torch")
        return None
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return None
    return torch


def run_cases(cases) -> int:
    """Runs each (name, callable returning a note); every case is reported
    before the status: 0 when all passed, 1 otherwise."""
    failed = 0
    for name, run in cases:
        try:
            print(f"{name}: ok ({run()})", flush=True)
        except Exception as e:  # noqa: BLE001 - every case reported, then the status
            traceback.print_exc()
            print(f"{name}: FAILED ({type(e).__name__}: {e})", flush=True)
            failed += 1
    return 1 if failed else 0
