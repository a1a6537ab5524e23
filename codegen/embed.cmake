# embed.cmake: turns include/h3/rng.h into a C string (h3_rng_header_text) that codegen
# pastes into the NVRTC prelude, so GPU `randn` runs the CPU generator's exact text.
# Included from the top-level CMakeLists.txt after h3_codegen; run again as a script
# (cmake -P) at build time whenever rng.h changes. Also links codegen's thread library.
if(CMAKE_SCRIPT_MODE_FILE)
  file(READ "${H3_EMBED_IN}" text)
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  string(REPLACE "\n" "\\n\"\n\"" text "${text}")
  file(WRITE "${H3_EMBED_OUT}.tmp"
       "/* generated from include/h3/rng.h by codegen/embed.cmake */\n"
       "static const char h3_rng_header_text[] =\n\"${text}\";\n")
  file(RENAME "${H3_EMBED_OUT}.tmp" "${H3_EMBED_OUT}")
else()
  set(H3_RNG_TEXT_H ${CMAKE_BINARY_DIR}/generated/h3_rng_text.h)
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/generated)
  add_custom_command(
    OUTPUT ${H3_RNG_TEXT_H}
    COMMAND ${CMAKE_COMMAND} -DH3_EMBED_IN=${CMAKE_SOURCE_DIR}/include/h3/rng.h
            -DH3_EMBED_OUT=${H3_RNG_TEXT_H} -P ${CMAKE_SOURCE_DIR}/codegen/embed.cmake
    DEPENDS ${CMAKE_SOURCE_DIR}/include/h3/rng.h ${CMAKE_SOURCE_DIR}/codegen/embed.cmake
    COMMENT "Embedding include/h3/rng.h for NVRTC")
  add_custom_target(h3_rng_text DEPENDS ${H3_RNG_TEXT_H})
  add_dependencies(h3_codegen h3_rng_text)
  target_include_directories(h3_codegen PRIVATE ${CMAKE_BINARY_DIR}/generated)
  # nvrtc_cache.c compiles translation units on two threads
  find_package(Threads REQUIRED)
  target_link_libraries(h3_codegen PUBLIC Threads::Threads)
endif()
