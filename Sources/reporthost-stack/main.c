/* reporthost-stack PID TID: the stack of a hung thread, captured from outside (SPEC B-4). */
#include "remote_capture.h"

int main(int argc, char **argv) { return rh_stack_main(argc, argv); }
