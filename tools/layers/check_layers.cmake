# The layers of the design notes (ARCHITECTURE.md), in the order of the data road. A source file
# may include headers of its own layer and of the layers before it, never of one after it:
#
#   sim/core ← sim/input ← models ← workloads ← topologies ← sim/engine ← sim/output ← sim (the road) ← tools
#
# Run at configure time by CMakeLists.txt, so that an upward include fails the build, and as a
# test (tests/CMakeLists.txt) on a tree made to break it, so that the check itself is checked.
#   cmake -DSTEPSIM_ROOT=DIR -P tools/layers/check_layers.cmake
set(STEPSIM_LAYERS sim/core sim/input models workloads topologies sim/engine sim/output sim tools)

# The index of the layer that holds `path` (relative to the root); -1 for files outside every
# layer (tests, system headers). A file directly in sim/ is the road; sim/<sub>/ is its own layer.
function(stepsim_layer_of path out)
  set(index -1)
  set(i 0)
  foreach(layer IN LISTS STEPSIM_LAYERS)
    if(layer STREQUAL "sim")
      if(path MATCHES "^sim/[^/]+$")
        set(index ${i})
      endif()
    elseif(path MATCHES "^${layer}/")
      set(index ${i})
    endif()
    math(EXPR i "${i} + 1")
  endforeach()
  set(${out} ${index} PARENT_SCOPE)
endfunction()

function(stepsim_check_layers root)
  file(GLOB_RECURSE sources RELATIVE ${root} ${root}/sim/*.cpp ${root}/sim/*.hpp ${root}/models/*.cpp
       ${root}/models/*.hpp ${root}/workloads/*.cpp ${root}/workloads/*.hpp ${root}/topologies/*.cpp
       ${root}/topologies/*.hpp ${root}/tools/*.cpp ${root}/tools/*.hpp)
  set(problems "")
  foreach(source IN LISTS sources)
    stepsim_layer_of(${source} from)
    file(STRINGS ${root}/${source} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" header "${line}")
      stepsim_layer_of(${header} to)
      if(to GREATER from)
        list(GET STEPSIM_LAYERS ${from} from_name)
        list(GET STEPSIM_LAYERS ${to} to_name)
        string(APPEND problems "\n  ${source} (${from_name}) includes ${header} (${to_name}), a later layer")
      endif()
    endforeach()
  endforeach()
  if(problems)
    string(REPLACE ";" " <- " order "${STEPSIM_LAYERS}")
    message(FATAL_ERROR "upward includes (the layers, in order: ${order}):${problems}")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND STEPSIM_ROOT)
  stepsim_check_layers(${STEPSIM_ROOT})
endif()
