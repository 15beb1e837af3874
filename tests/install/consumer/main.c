/* Opens a participant outside any supervisor, through the installed header and library:
 * the open must fail and say why in one line. Exit 0 when it does. */
#include <comfy_supervisor/participant_c_api.h>

#include <stdio.h>

int main(void) {
    comfy_participant* participant = comfy_participant_open(0);
    const char* error = comfy_participant_last_error();
    if (participant != NULL || error[0] == '\0') {
        fprintf(stderr, "consumer: open outside a supervisor should fail with a message\n");
        comfy_participant_close(participant);
        return 1;
    }
    printf("consumer: open refused as expected: %s\n", error);
    return 0;
}
