#!/usr/bin/env bash
# Builds amor-run on the H200 machine (Ubuntu 24.04, CUDA 13), where nothing can be installed.
# It has CMake 4, ninja, OpenBLAS, fmt, GoogleTest, HDF5, yaml-cpp, Open MPI and PyTorch (in the
# python3 first on PATH, not /usr/bin/python3), but only Boost's headers and PCRE2's runtime
# library (libpcre2-8.so.0) without its headers, and no utf8proc of Debian 12's soname (its
# libutf8proc.so.2). Debian packages for what is missing travel with
# the call in .carry/debs (git-ignored) and are unpacked into a private prefix, never into /.
# Fetch them on a Debian 12 machine (README "Building"):
#
#   mkdir -p .carry/debs && cd .carry/debs && apt-get download libboost-program-options1.74.0 \
#     libboost-program-options1.74-dev libboost1.74-dev libpcre2-dev libutf8proc-dev libutf8proc2 \
#     bible-kjv bible-kjv-text
#
# Boost.Program_options: its library and headers (the prefix becomes Boost_ROOT). PCRE2:
# libpcre2-dev's headers and pkg-config files; the files are pointed at the prefix and its
# libpcre2-8.so at the machine's own libpcre2-8.so.0 (below), so nothing of Debian's PCRE2 runtime
# is loaded. Without libpcre2-dev the configure step fails (data/CMakeLists.txt: pkg-config finds
# no libpcre2-8). utf8proc (data/text's Unicode tables): libutf8proc-dev's header, pkg-config file
# and libutf8proc.so link, and libutf8proc2's libutf8proc.so.2 itself, all used from the prefix;
# the binaries find it through their build RPATH (CMake adds the prefix's lib directory, where the
# library was found) and env.sh's LD_LIBRARY_PATH. Without them the configure step stops with
# "utf8proc not found".
#
#   scripts/gpu_machine_build.sh BUILD_DIR [setup.sh options]
# Writes BUILD_DIR/env.sh (LD_LIBRARY_PATH for the unpacked libraries, AMOR_BIBLE when the
# bible-kjv and bible-kjv-text debs are carried too: the built-in corpus needs them); source it
# before running (and pass both to mpirun's ranks: -x LD_LIBRARY_PATH -x AMOR_BIBLE).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$(realpath -m "$1"); shift
prefix=/tmp/amor-prefix
mkdir -p "$prefix" "$build_dir"
# One unpack at a time: builds of several trees started together share the prefix, and two
# dpkg -x into it at once fail ("Cannot open: File exists"; session 17's first call lost a build).
exec 9> "$prefix.lock"
flock 9
for deb in "$root"/.carry/debs/*.deb; do
  [ -e "$deb" ] && dpkg -x "$deb" "$prefix"
done
lib="$prefix/usr/lib/x86_64-linux-gnu"
# PCRE2: the machine has the runtime (libpcre2-8.so.0) but not the headers; the carried
# libpcre2-dev brings headers and a pkg-config file, pointed here at the prefix and the system's .so.
if [ -e "$lib/pkgconfig/libpcre2-8.pc" ]; then
  sed -i "s|^prefix=.*|prefix=$prefix/usr|" "$lib"/pkgconfig/libpcre2-*.pc
  sys_pcre=$(ls /usr/lib/x86_64-linux-gnu/libpcre2-8.so.0* 2>/dev/null | head -n 1)
  [ -n "$sys_pcre" ] && ln -sf "$sys_pcre" "$lib/libpcre2-8.so"
fi
# utf8proc: header, pkg-config file and library all from the carried debs (libutf8proc.so ->
# libutf8proc.so.2.x in the prefix); its .pc file is pointed at the prefix.
if [ -e "$lib/pkgconfig/libutf8proc.pc" ]; then
  sed -i "s|^prefix=.*|prefix=$prefix/usr|" "$lib/pkgconfig/libutf8proc.pc"
fi
flock -u 9
exec 9>&-
if [ -d "$lib/pkgconfig" ]; then
  export PKG_CONFIG_PATH="$lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
fi
cmake_args=(-DAMOR_PYTHON="$(command -v python3)")
if [ -d "$prefix/usr/include/boost" ]; then
  cmake_args+=(-DBoost_ROOT="$prefix/usr" -DBoost_NO_SYSTEM_PATHS=ON)
fi
echo "export LD_LIBRARY_PATH=$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" > "$build_dir/env.sh"
# The built-in corpus (data.source corpus) reads Debian's `bible` program (bible-kjv and
# bible-kjv-text, carried like the libraries). Unpacked into the prefix it must be told where its
# data is (-p), so env.sh points AMOR_BIBLE at a wrapper that does.
if [ -x "$prefix/usr/bin/bible" ]; then
  printf '#!/bin/sh\nexec %s -p %s/ "$@"\n' "$prefix/usr/bin/bible" "$prefix/usr/lib" > "$build_dir/bible"
  chmod +x "$build_dir/bible"
  echo "export AMOR_BIBLE=$build_dir/bible" >> "$build_dir/env.sh"
fi
"$root/scripts/setup.sh" --no-install --build-dir "$build_dir" "$@" -- "${cmake_args[@]}"
