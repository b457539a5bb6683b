"""The Python client's shared-memory ownership proof writes its 16 bytes only
into the shared-memory object the name names (topk_client.regions,
_proving_ownership): a name that is no POSIX shared-memory name ("/../f",
"/a/b", a NUL byte, "/.", "/..") or a symbolic link planted in /dev/shm never
reaches another file. No server, GPU or torch: the function is called
directly and each file is read while the proof would be in place (the
function puts the bytes back when it ends, so only inside does it show).

Exit 77 (skip) when this python3 lacks the package's needs (grpcio, numpy).
Usage: PYTHONPATH=<build>/python python3 python_shm_proof_test.py
"""
import hashlib
import os
import secrets
import sys
import tempfile

try:
    from topk_client.regions import _proving_ownership
except ImportError as missing:  # grpcio / numpy / protobuf absent
    print(f"SKIP: {missing}")
    sys.exit(77)

SESSION = "0123456789abcdef0123456789abcdef"
PROOF = hashlib.sha256(b"topk-shm-ownership\0" + SESSION.encode()).digest()[:16]
# Not zeros, and not the proof: a write of the proof shows.
ORIGINAL = bytes((i * 7 + 3) % 251 for i in range(64))


def make_file(path: str) -> None:
    with open(path, "wb") as f:
        f.write(ORIGINAL)


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def check_untouched(shm_name: str, victim: str) -> None:
    with _proving_ownership(shm_name, 0, SESSION):
        inside = read(victim)
    assert inside == ORIGINAL, (f"{shm_name!r}: the proof was written into {victim} "
                                f"(bytes 0..16 now {inside[:16].hex()})")
    assert read(victim) == ORIGINAL, f"{shm_name!r}: {victim} changed"


def main() -> int:
    token = secrets.token_hex(6)
    own = f"/topk-proof-test-{token}"
    own_path = "/dev/shm" + own
    link = f"/topk-proof-link-{token}"
    link_path = "/dev/shm" + link
    checked = 0
    with tempfile.TemporaryDirectory() as scratch:
        victim = os.path.join(scratch, "victim")
        make_file(victim)
        make_file(own_path)
        try:
            # The control: a real object gets the proof, then its bytes back.
            with _proving_ownership(own, 0, SESSION):
                assert read(own_path)[:16] == PROOF, "no proof in a valid object"
                assert read(own_path)[16:] == ORIGINAL[16:], "wrote past the proof"
            assert read(own_path) == ORIGINAL, "the object's bytes did not come back"
            checked += 1

            # Path traversal out of /dev/shm: the defect the check closes.
            traversal = "/.." * 8 + victim
            assert os.path.realpath("/dev/shm" + traversal) == os.path.realpath(victim)
            check_untouched(traversal, victim)
            checked += 1
            # A NUL byte: shm_open(3) would stop there and open `own`.
            check_untouched(own + "\0cd", own_path)
            checked += 1
            # Another '/', "/." and "/.." (directories), too long, no leading '/'.
            for name in (own + "/x", "/.", "/..", "/" + "a" * 255, own[1:], "/", ""):
                with _proving_ownership(name, 0, SESSION):
                    pass
                checked += 1
            assert read(own_path) == ORIGINAL

            # A symbolic link planted in /dev/shm is not followed (shm_open's
            # O_NOFOLLOW).
            os.symlink(victim, link_path)
            check_untouched(link, victim)
            checked += 1
        finally:
            for path in (own_path, link_path):
                if os.path.lexists(path):
                    os.unlink(path)
    print(f"{checked} names checked: the proof reached only the object its name names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
