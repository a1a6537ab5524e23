# embed.cmake: turns the kernel sources of kernels/ (*.cu, *.cuh) into C strings, one table
# (h3_kernel_texts[]) in a generated C file, so that libh3_kernels carries every hand-written
# kernel and the prelude. A line `#include "h3/rng.h"` is replaced by that header's text (the
# GPU's `randn` runs the CPU generator's exact source). Run as a script (cmake -P) by the
# custom command in the top-level CMakeLists.txt whenever a kernel file or rng.h changes.
#   -DH3_EMBED_FILES=a.cu|b.cuh  -DH3_EMBED_RNG=include/h3/rng.h  -DH3_EMBED_OUT=out.c
string(REPLACE "|" ";" files "${H3_EMBED_FILES}")
file(READ "${H3_EMBED_RNG}" rng)
set(out "/* generated from kernels/ by kernels/embed.cmake: do not edit */\n")
string(APPEND out "#include \"h3/kernels.h\"\n")
set(table "")
set(i 0)
foreach(f ${files})
  get_filename_component(name "${f}" NAME)
  file(READ "${f}" text)
  string(REPLACE "#include \"h3/rng.h\"\n" "${rng}" text "${text}")
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
