# The line of a source file that holds a value CMake reads from it (the version, the oldest
# Python), found by `regex` into `out`; a file without it stops the configure, saying what
# line to restore (`expected`). CMake configures again when the file changes.
function(comfy_source_line file regex expected out)
    file(STRINGS ${file} line REGEX "${regex}")
    if(NOT line)
        message(FATAL_ERROR "${file} has no line ${expected}; restore it")
    endif()
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${file})
    set(${out} "${line}" PARENT_SCOPE)
endfunction()
