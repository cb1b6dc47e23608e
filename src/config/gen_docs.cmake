# cmake -DMONGOCDC=<binary> -DOUT=<file> [-DCHECK=1] -P gen_docs.cmake
# Writes the Markdown printed by `mongocdc --config-markdown` to OUT, or with
# CHECK=1 fails when OUT differs from it (the committed docs are stale).
execute_process(COMMAND ${MONGOCDC} --config-markdown
  OUTPUT_VARIABLE md RESULT_VARIABLE rc TIMEOUT 30)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mongocdc --config-markdown failed: ${rc}")
endif()
if(CHECK)
  file(READ ${OUT} committed)
  if(NOT committed STREQUAL md)
    message(FATAL_ERROR "${OUT} is stale: rebuild it with the config-docs target")
  endif()
else()
  file(WRITE ${OUT} "${md}")
endif()
