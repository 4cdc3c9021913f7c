# verl_embed(<target> <name> FILES f1 f2 ...) generates a .cc that holds every file's bytes
# and a lookup `verl::embedded::find("relative/path")`, so templates ship inside the binary.
# Files are read at build time; editing one re-generates the .cc. An entry NAME=/abs/path
# embeds a file from outside BASE under NAME (a library installed by npm into web/node_modules).
function(verl_embed target)
  cmake_parse_arguments(E "" "BASE" "FILES" ${ARGN})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/embedded_files.cc)
  set(abs_files)
  foreach(f ${E_FILES})
    if(f MATCHES "^([^=]+)=(.+)$")
      list(APPEND abs_files ${CMAKE_MATCH_2})
    else()
      list(APPEND abs_files ${E_BASE}/${f})
    endif()
  endforeach()
  string(REPLACE ";" "|" files_arg "${E_FILES}")  # a ';' would split the argument
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DBASE=${E_BASE} "-DFILES=${files_arg}"
            -P ${CMAKE_SOURCE_DIR}/cmake/embed_generate.cmake
    DEPENDS ${abs_files} ${CMAKE_SOURCE_DIR}/cmake/embed_generate.cmake
    COMMENT "Embedding templates into ${target}" VERBATIM)
  add_library(${target} STATIC ${out})
  target_include_directories(${target} PUBLIC ${CMAKE_SOURCE_DIR})
endfunction()
