# topk_spill_gate(<target> ALLOWLIST <file>): the design's rule that the hot
# loops keep their registers, enforced at build time. Every CUDA object of
# <target> compiles with ptxas's spill warnings (-warn-spills) and resource
# report (--resource-usage: it names each ptxas run's architecture) through
# cmake/spill_gate.py, which fails the object when a function spills registers
# that <file> does not allow (see that file's header). No GPU is needed: ptxas
# reports, once per architecture of CMAKE_CUDA_ARCHITECTURES.
set(TOPK_SPILL_GATE_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/spill_gate.py)

function(topk_spill_gate target)
  cmake_parse_arguments(ARG "" "ALLOWLIST" "" ${ARGN})
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  find_program(TOPK_CXXFILT c++filt)
  if(NOT TOPK_CXXFILT)
    message(FATAL_ERROR "topk: the spill gate needs c++filt (binutils); or -DTOPK_SPILL_GATE=OFF")
  endif()
  # The gate wraps whatever launcher the target already has (ccache replays
  # ptxas's report on a cache hit, so cached objects are checked too).
  get_target_property(inner ${target} CUDA_COMPILER_LAUNCHER)
  set(launcher ${Python3_EXECUTABLE} ${TOPK_SPILL_GATE_SCRIPT} --allowlist ${ARG_ALLOWLIST}
               --cxxfilt ${TOPK_CXXFILT} --)
  if(inner)
    list(APPEND launcher ${inner})
  endif()
  set_target_properties(${target} PROPERTIES CUDA_COMPILER_LAUNCHER "${launcher}")
  target_compile_options(${target} PRIVATE
                         $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-warn-spills --resource-usage>)
  # An edited allow-list or gate re-checks every object (ccache hits: seconds).
  get_target_property(sources ${target} SOURCES)
  foreach(source IN LISTS sources)
    if(source MATCHES "\\.cu$")
      set_property(SOURCE ${source} APPEND PROPERTY OBJECT_DEPENDS ${ARG_ALLOWLIST}
                                                               ${TOPK_SPILL_GATE_SCRIPT})
    endif()
  endforeach()
endfunction()
