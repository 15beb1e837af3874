# comfy_rewrite_paths(SOURCE OUTPUT FROM TO [FROM TO]...): writes OUTPUT as SOURCE with each
# FROM replaced by its TO; used when configuring (the installed demo config) and when
# installing (the systemd unit), by cmake/install.cmake. A FROM that is no longer in
# SOURCE stops it, so a changed source cannot be installed with stale paths.
function(comfy_rewrite_paths source output)
    file(READ "${source}" text)
    set(pairs ${ARGN})
    while(pairs)
        list(POP_FRONT pairs from to)
        string(FIND "${text}" "${from}" found)
        if(found EQUAL -1)
            message(FATAL_ERROR "${source} no longer holds '${from}'; update its rewrite in cmake/install.cmake")
        endif()
        string(REPLACE "${from}" "${to}" text "${text}")
    endwhile()
    file(WRITE "${output}" "${text}")
endfunction()
