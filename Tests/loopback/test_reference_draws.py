"""The bench's reference emulator (scripts/bench.d/tcp_reference.py) with `--netcond-draws` draws each
direction's losses from the streams netcond's packet link uses for the same seed. These lists are the
ones LinkSeedTests (Swift) pins for netcond: seed 301, 5 % loss, the first 300 packets each way."""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXPECTED = {
    0: [67, 128, 136, 153, 170, 181, 215, 225, 273, 291],
    1: [5, 7, 13, 19, 34, 36, 55, 70, 78, 117, 122, 141, 164, 168, 186, 223, 232, 242],
}


def load_reference():
    spec = importlib.util.spec_from_file_location("tcp_reference", os.path.join(ROOT, "scripts/bench.d/tcp_reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_direction_loses_the_packets_netcond_would():
    reference = load_reference()
    for direction, stream in enumerate(reference.netcond_loss_streams(301)):
        link = reference.Link(12e6, 0.05, 0.05, 1000, stream, loss_first=True)
        lost = [i for i in range(300) if link.admit(i * 0.01, 1500) is None]
        assert lost == EXPECTED[direction], f"direction {direction}"

