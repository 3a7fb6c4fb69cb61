"""Builds the `emo` wheel: the package's Python files (python/emo) and its native module, built
by the project's CMake (target _emo) against the interpreter running this. Set EMO_BUILD_DIR to
a configured build of this repository (e.g. build/ci) to take its module instead of building
one (build/wheel, Release, no tests or benchmarks). The module links EMO's Debian libraries
dynamically: the wheel is for machines with them (scripts/setup.sh)."""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))


def native_module_dir():
    build = os.environ.get("EMO_BUILD_DIR")
    if build:
        build = os.path.abspath(build)
    else:
        build = os.path.join(ROOT, "build", "wheel")
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                               "-DEMO_BUILD_TESTS=OFF", "-DEMO_BUILD_BENCH=OFF",
                               f"-DPython3_EXECUTABLE={sys.executable}"])
    subprocess.check_call(["cmake", "--build", build, "--target", "_emo", "-j", str(os.cpu_count() or 1)])
    return os.path.join(build, "python", "emo")


class BuildWithNativeModule(build_py):
    def run(self):
        super().run()
        built = native_module_dir()
        modules = glob.glob(os.path.join(built, "_emo*.so"))
        if len(modules) != 1:
            raise RuntimeError(f"expected one built emo/_emo*.so, found {modules}")
        target = os.path.join(self.build_lib, "emo")
        os.makedirs(target, exist_ok=True)
        shutil.copy2(modules[0], target)
        # The tracer library of emo.trace, where the build found CUPTI (python/CMakeLists.txt).
        for tracer in glob.glob(os.path.join(built, "libemo_inject.so")):
            shutil.copy2(tracer, target)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):  # a platform wheel: the package carries a native module
        return True


setup(packages=["emo"], package_dir={"emo": "python/emo"}, cmdclass={"build_py": BuildWithNativeModule},
      distclass=BinaryDistribution)
