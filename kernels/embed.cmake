# embed.cmake: turns the kernel sources of kernels/ (*.cu, *.cuh) into C strings, one table
# (h3_kernel_texts[]) in a generated C file, so that libh3_kernels carries every hand-written
# kernel and the prelude. A line `#include "h3/NAME.h"` naming one of the shared headers
# (H3_EMBED_SHARED: include/h3/rng.h and include/h3/scalar.h, which the CPU backend compiles
# too) is replaced by that header's text, so the GPU runs the CPU's exact source. Run as a
# script (cmake -P) by the custom command in the top-level CMakeLists.txt whenever a kernel
# file or a shared header changes.
#   -DH3_EMBED_FILES=a.cu|b.cuh  -DH3_EMBED_SHARED=include/h3/rng.h|...  -DH3_EMBED_OUT=out.c
string(REPLACE "|" ";" files "${H3_EMBED_FILES}")
string(REPLACE "|" ";" shared "${H3_EMBED_SHARED}")
set(out "/* generated from kernels/ by kernels/embed.cmake: do not edit */\n")
string(APPEND out "#include \"h3/kernels.h\"\n")
set(table "")
set(i 0)
foreach(f ${files})
  get_filename_component(name "${f}" NAME)
  file(READ "${f}" text)
  foreach(h ${shared})
    get_filename_component(hname "${h}" NAME)
    file(READ "${h}" htext)
    string(REPLACE "#include \"h3/${hname}\"\n" "${htext}" text "${text}")
  endforeach()
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  string(REPLACE "\n" "\\n\"\n\"" text "${text}")
  string(APPEND out "static const char text_${i}[] =\n\"${text}\";\n")
  string(APPEND table "    {\"${name}\", text_${i}},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND out "const h3_kernel_text h3_kernel_texts[] = {\n${table}    {0, 0}};\n")
file(WRITE "${H3_EMBED_OUT}.tmp" "${out}")
file(RENAME "${H3_EMBED_OUT}.tmp" "${H3_EMBED_OUT}")
