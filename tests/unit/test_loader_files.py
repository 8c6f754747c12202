"""What the loader does with files that are not what they seem: values beyond what Docker
takes, symlinks, devices and fifos (on disk and in git), and a folder that is no config
repo at all. Real files, real symlinks, real git repositories under ``tmp_path``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import git
import pytest

from phrame.cli import main
from phrame.config_repo import load, load_directory, load_git, render, validate
from phrame.config_repo.sources import MAX_FILE_BYTES, DirectorySource
from schemas import Topics, check_payload

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "fixtures" / "phrame-config"
INT64_MAX = 2**63 - 1
SERVICES = "environments/lab/services"


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def lab(root: Path, **extra: str) -> Path:
    """A small valid repo: node ``bare`` (no capacity), environment ``lab``, service ``web``."""
    files = {
        "nodes/bare.yaml": "name: bare\n",
        "environments/lab/environment.yaml": "name: lab\n",
        f"{SERVICES}/web.yaml": "name: web\nimage: web:1\nplacement:\n  node: bare\n",
    }
    return write(root, {**files, **extra})


def service(name: str, resources: str, node: str = "bare") -> str:
    return f"name: {name}\nimage: {name}:1\nresources:\n{resources}placement:\n  node: {node}\n"


def validate_out(path: Path, capsys: pytest.CaptureFixture[str], *more: str) -> tuple[int, str, str]:
    code = main(["validate", str(path), *more])
    out = capsys.readouterr()
    return code, out.out, out.err


# 1. numbers that validate must render into values Docker takes (int64)


def test_cpus_beyond_the_maximum_is_a_schema_error_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # pinned to a node without capacity: no capacity rule stands in for the schema
    root = lab(tmp_path, **{f"{SERVICES}/big.yaml": service("big", "  cpus: 1e300\n")})
    code, out, _ = validate_out(root, capsys)
    assert code == 1
    line = f"{SERVICES}/big.yaml:4:9: schema: 1e+300 is greater than the maximum of 1024"
    assert out.splitlines()[0] == line
    assert main(["render", str(root)]) == 1  # refused, not an OverflowError


@pytest.mark.parametrize(
    ("memory", "column"),
    [("1000Ti", 11), ("1000000Gi", 11), ("1000000000000000", 11), ("9" * 400 + "Ti", 11)],
)
def test_memory_beyond_about_one_pib_is_a_schema_error(
    memory: str, column: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the 400-digit one used to crash validation itself (float overflow in the capacity rule)
    root = lab(
        tmp_path,
        **{
            "nodes/roomy.yaml": "name: roomy\ncapacity:\n  memory: 1Gi\n",
            f"{SERVICES}/big.yaml": service("big", f"  memory: '{memory}'\n", node="roomy"),
        },
    )
    code, out, err = validate_out(root, capsys)
    assert (code, err.startswith(str(root))) == (1, True)
    assert out.startswith(f"{SERVICES}/big.yaml:4:{column}: schema: ")
    assert "at most about 1 PiB" in out


def test_cpus_below_what_docker_takes_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # round(0.001 * 1e9) would be a NanoCPUs Docker refuses; 0 would mean "no limit"
    root = lab(tmp_path, **{f"{SERVICES}/tiny.yaml": service("tiny", "  cpus: 0.001\n")})
    code, out, _ = validate_out(root, capsys)
    assert code == 1 and f"{SERVICES}/tiny.yaml:4:9: schema: 0.001 is less than the minimum of 0.01" in out


def test_resources_at_the_maximum_validate_and_render(tmp_path: Path) -> None:
    at_max = "  cpus: 1024\n  memory: 999Ti\n"
    root = lab(
        tmp_path,
        **{
            "nodes/roomy.yaml": f"name: roomy\ncapacity:\n{at_max}",
            f"{SERVICES}/big.yaml": service("big", at_max),
            f"{SERVICES}/full.yaml": service("full", at_max, node="roomy"),
            f"{SERVICES}/small.yaml": service("small", "  cpus: 0.01\n  memory: '1'\n"),
        },
    )
    repo, read = load_directory(root)
    assert validate(repo, read) == []
    topics = render(repo).topics()
    for node, name in (("bare", "big"), ("roomy", "full")):
        payload = topics[Topics().desired_item(node, "containers", f"lab.{name}.0")]
        check_payload("desired-container", payload)
        assert payload["resources"] == {"nano_cpus": 1024 * 10**9, "memory": 999 * 2**40}
        assert max(payload["resources"].values()) <= INT64_MAX
    small = topics[Topics().desired_item("bare", "containers", "lab.small.0")]
    assert small["resources"] == {"nano_cpus": 10**7, "memory": 1}


# 2. symlinks and special files: reported, never followed, never read past the limit


def test_dangling_symlink_is_reported_not_a_traceback(tmp_path: Path) -> None:
    root = lab(tmp_path)
    (root / SERVICES / ".#web.yaml").symlink_to("/nonexistent/x")  # an Emacs lock file
    repo, read = load_directory(root)
    problems = validate(repo, read)
    assert [(p.file, p.rule) for p in problems] == [(f"{SERVICES}/.#web.yaml", "unknown-file")]
    assert "a symbolic link to /nonexistent/x" in problems[0].message
    assert repo.environments["lab"].services["web"].schema_ok  # the real file is untouched


def test_symlinked_file_is_not_followed_even_to_a_valid_file(tmp_path: Path) -> None:
    root = lab(tmp_path, **{"shared/api.yaml": "name: api\nimage: api:1\nplacement:\n  node: bare\n"})
    (root / SERVICES / "api.yaml").symlink_to("../../../shared/api.yaml")
    repo, read = load_directory(root)
    (p,) = validate(repo, read)
    assert (p.file, p.rule) == (f"{SERVICES}/api.yaml", "unknown-file")
    # the name stays known (a placeholder), so a depends_on on it is not reported twice
    assert not repo.environments["lab"].services["api"].is_readable


def test_symlinked_folder_is_reported_not_walked(tmp_path: Path) -> None:
    root = lab(tmp_path / "repo")
    elsewhere = write(tmp_path / "elsewhere", {"db.yaml": "name: db\nimage: db:1\n"})
    (root / "environments" / "lab" / "networks").symlink_to(elsewhere, target_is_directory=True)
    repo, read = load_directory(root)
    problems = validate(repo, read)
    assert [(p.file, p.rule) for p in problems] == [("environments/lab/networks", "unknown-file")]
    assert repo.environments["lab"].networks == {}


@pytest.mark.parametrize("kind", ["link to /dev/zero", "fifo"])
def test_devices_and_fifos_are_refused_without_reading_them(kind: str, tmp_path: Path) -> None:
    # A subprocess with a time and memory bound: the old reader followed /dev/zero until
    # MemoryError and blocked forever opening a fifo with no writer.
    root = lab(tmp_path)
    if kind == "fifo":
        os.mkfifo(root / SERVICES / "odd.yaml")
        what = "a fifo"
    else:
        (root / SERVICES / "odd.yaml").symlink_to("/dev/zero")
        what = "a symbolic link to /dev/zero"
    bounded = ["prlimit", f"--as={2 * 2**30}", sys.executable, "-m", "phrame", "validate", str(root)]
    done = subprocess.run(bounded, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert "Traceback" not in done.stderr and done.returncode == 1
    assert done.stdout.splitlines() == [
        f"{SERVICES}/odd.yaml:1:1: unknown-file: {what}; only regular files belong here (links are never followed)"
    ]


def test_a_read_never_returns_more_than_the_limit_and_one_byte(tmp_path: Path) -> None:
    # the listed size is only a hint: a file can grow between listing and reading
    root = lab(tmp_path)
    (root / "nodes" / "huge.yaml").write_bytes(b"#" * (3 * MAX_FILE_BYTES))
    assert len(DirectorySource(root).read("nodes/huge.yaml")) == MAX_FILE_BYTES + 1


def commit_all(work: Path, message: str = "config") -> git.Repo:
    repo = git.Repo.init(work)
    repo.git.add(A=True)
    repo.git.commit("-m", message, "--no-verify", author="t <t@example.com>")
    return repo


def test_git_symlink_blob_is_reported_not_parsed_as_content(tmp_path: Path) -> None:
    work = lab(
        tmp_path / "work", **{"shared/api.yaml": "name: api\nimage: api:1\nplacement:\n  node: bare\n"}
    )
    (work / SERVICES / "api.yaml").symlink_to("../../../shared/api.yaml")
    (work / SERVICES / "zero.yaml").symlink_to("/dev/zero")
    repo = commit_all(work)
    # a gitlink (submodule) where a file belongs: a commit of another repository, no content
    repo.git.update_index("--add", "--cacheinfo", f"160000,{repo.head.commit.hexsha},{SERVICES}/sub.yaml")
    repo.git.commit("-m", "gitlink", "--no-verify", author="t <t@example.com>")
    assert repo.head.commit.tree[f"{SERVICES}/api.yaml"].mode == 0o120000
    loaded, read = load_git(work, "HEAD")
    problems = validate(loaded, read)
    assert [(p.file, p.rule, p.message.split(";")[0]) for p in problems] == [
        (f"{SERVICES}/api.yaml", "unknown-file", "a symbolic link to ../../../shared/api.yaml"),
        (f"{SERVICES}/sub.yaml", "unknown-file", "a git submodule"),
        (f"{SERVICES}/zero.yaml", "unknown-file", "a symbolic link to /dev/zero"),
    ]
    # the same commit read from disk says the same about the links
    disk = validate(*load_directory(work))
    assert [(p.file, p.rule) for p in disk if "symbolic link" in p.message] == [
        (f"{SERVICES}/api.yaml", "unknown-file"),
        (f"{SERVICES}/zero.yaml", "unknown-file"),
    ]


def test_git_read_is_bounded_too(tmp_path: Path) -> None:
    from phrame.config_repo.sources import GitSource

    work = lab(tmp_path)
    (work / "nodes" / "huge.yaml").write_bytes(b"#" * (2 * MAX_FILE_BYTES))
    commit_all(work)
    assert len(GitSource(work).read("nodes/huge.yaml")) == MAX_FILE_BYTES + 1
    _, read = load(GitSource(work))
    assert [(p.file, p.rule) for p in read] == [("nodes/huge.yaml", "file-too-large")]


# 3. a folder that is no config repo is a usage error, not "valid; 0 nodes"


@pytest.mark.parametrize("command", ["validate", "render", "plan"])
def test_a_folder_that_is_no_config_repo_exits_2(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for folder in (tmp_path / "empty", ROOT / "fixtures"):
        folder.mkdir(exist_ok=True)
        assert main([command, str(folder)]) == 2
        err = capsys.readouterr().err
        assert f"phrame {command}: {folder} is not a phrame config repo: no nodes/ or environments/" in err


def test_a_git_commit_without_the_layout_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    work = write(tmp_path / "work", {"README.md": "not yet\n"})
    repo = commit_all(work, "readme only")
    first = repo.head.commit.hexsha
    lab(work)
    commit_all(work, "the layout")
    assert main(["validate", str(work), "--ref", first]) == 2
    assert f"{work} at {first} is not a phrame config repo" in capsys.readouterr().err
    assert main(["validate", str(work), "--ref", "HEAD"]) == 0
    bare = tmp_path / "bare.git"
    git.Repo.init(bare, bare=True)
    repo.create_remote("origin", str(bare)).push(f"{first}:refs/heads/main")
    assert main(["validate", str(bare)]) == 2  # a bare repository reads its HEAD


def test_a_repo_with_only_nodes_is_a_config_repo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "nodes").mkdir()
    assert main(["validate", str(tmp_path)]) == 0  # a new inventory, still empty
    write(tmp_path, {"nodes/n1.yaml": "name: n1\n"})
    assert main(["validate", str(tmp_path)]) == 0
    assert main(["render", str(tmp_path)]) == 0
    assert "valid; 1 nodes, 0 environments" in capsys.readouterr().err
