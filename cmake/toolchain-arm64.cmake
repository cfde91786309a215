# Cross-compiles shmguard for linux/arm64 (aarch64) on a Debian amd64 host, against Debian's
# multiarch :arm64 packages (hack/cross.sh deps installs them and the cross toolchain).
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-arm64.cmake   (hack/cross.sh build)
# Libraries and headers come from /usr/lib/aarch64-linux-gnu and /usr/include/aarch64-linux-gnu;
# nothing of the host's x86_64 tree is searched. Test binaries (and gtest_discover_tests, ctest)
# run through qemu-user.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# The cross compiler's own tree (libstdc++, crt files) and the multiarch packages: both under /usr.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config reads only the arm64 .pc files (and the arch-independent ones).
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
# The aarch64 loader and libraries are installed as multiarch packages, so qemu needs no -L.
find_program(SHMGUARD_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${SHMGUARD_QEMU_AARCH64})
