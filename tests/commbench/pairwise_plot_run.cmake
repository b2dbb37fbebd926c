# `ringpilot bench comm --device cpu --np 3 --pairwise --plot FILE.svg` end to end (ctest -P
# script). -DRINGPILOT=<ringpilot binary> -DOUT=<svg path>. Exit 0, the matrix printed, the
# heat map written with one cell per ordered pair (9) and the 3 diagonal cells grey.
file(REMOVE "${OUT}")
execute_process(COMMAND ${RINGPILOT} bench comm --device cpu --np 3 --pairwise --max-bytes 64K
                        --iters 3 --warmup 1 --plot ${OUT}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "exit status ${rc}\n${err}\n${out}")
endif()
if(NOT out MATCHES "rows send, columns receive" OR NOT out MATCHES "# plot written to ")
  message(FATAL_ERROR "no matrix or no plot line:\n${out}")
endif()
file(READ "${OUT}" svg)
string(REGEX MATCHALL "<rect class=\"pair\"" cells "${svg}")
list(LENGTH cells n)
string(REGEX MATCHALL "fill=\"#dddddd\"" diagonal "${svg}")
list(LENGTH diagonal d)
if(NOT n EQUAL 9 OR NOT d EQUAL 3 OR NOT svg MATCHES "</svg>\n$")
  message(FATAL_ERROR "heat map: ${n} cells (want 9), ${d} grey (want 3)\n${svg}")
endif()
message(STATUS "pairwise heat map: ${n} cells")
