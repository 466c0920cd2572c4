"""The Triton exercise page's way home (issue 23 item 5): it links the nlpcore wheel the build
made and the kernel starter, and gives the commands that install the wheel and grade a kernel;
those very commands, read off the page, work in a clean virtual environment that has only the
wheel (PyTorch, Triton and NumPy -- the learner's own GPU stack -- come from this test's
environment through a .pth file, after the wheel's own site-packages)."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig

import pytest

from nlpcore import lab

TRITON = lab.exercise("triton")


def test_the_page_links_the_wheel_and_its_commands_grade_a_kernel_from_a_clean_venv(page, site_url, tmp_path):
    page.goto(f"{site_url}exercise.html?id=triton&step=port")
    page.wait_for_selector("[data-testid=way-home][data-state=ready]")
    wheel_href = page.get_attribute("[data-testid=wheel-link]", "href")
    wheel_name = page.get_attribute("[data-testid=wheel-link]", "download")
    assert wheel_href == f"wheels/{wheel_name}" and wheel_name.startswith("nlpcore-") and wheel_name.endswith(".whl")
    install = page.inner_text("[data-testid=home-install]").strip()
    grade = page.inner_text("[data-testid=home-grade]").strip()
    grade_cpu = page.inner_text("[data-testid=home-grade-cpu]").strip()
    assert install == f"python -m pip install {wheel_name}"
    assert grade == TRITON.extra["check_command"]                # one place for the command
    local = {c["id"]: c["command"] for c in TRITON.to_data()["steps"][0]["checks"] if c["runner"] == "local"}
    assert grade == local["gpu"] and grade_cpu == local["interpreter"]
    kernel_name = page.get_attribute("[data-testid=kernel-link]", "download")
    assert kernel_name in grade.split()

    # Download what the page links, as a learner would.
    home = tmp_path / "home"
    home.mkdir()
    for link in ("wheel-link", "kernel-link"):
        href = page.get_attribute(f"[data-testid={link}]", "href")
        response = page.request.get(site_url + href)
        assert response.ok, href
        (home / page.get_attribute(f"[data-testid={link}]", "download")).write_bytes(response.body())

    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
    except ImportError:
        pytest.skip("PyTorch and Triton are not installed here, so the grader cannot run")
    venv = tmp_path / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", str(venv)], check=True)
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    with open(os.path.join(purelib, "gpu-stack.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"

    def sh(command):
        return subprocess.run(["bash", "-c", command], cwd=home, env=env, capture_output=True, text=True, timeout=900)

    done = sh(install + " --no-index")                           # offline here; the wheel needs only NumPy
    assert done.returncode == 0, done.stdout + done.stderr
    where = sh("python -c 'import nlpcore; print(nlpcore.__file__)'")
    assert where.stdout.strip().startswith(purelib), where.stdout + where.stderr

    starter = sh(grade_cpu)                                      # the starter's TODOs fail the checks
    assert starter.returncode != 0, starter.stdout[-2000:] + starter.stderr[-2000:]
    (home / kernel_name).write_text(TRITON_SOLUTION_KERNEL())
    solved = sh(grade_cpu)
    assert solved.returncode == 0 and "checks passed" in solved.stdout, solved.stdout[-2000:] + solved.stderr[-2000:]
    assert shlex.split(grade_cpu)[0] == "TRITON_INTERPRET=1"


def TRITON_SOLUTION_KERNEL():
    from nlpcore.lab.exercises import module as exercise_module
    return exercise_module("triton", "exercise").HERE.text("kernel_solution.py")
