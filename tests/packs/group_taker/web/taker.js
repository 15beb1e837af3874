// group_taker's front end: served by the host under /extensions/group_taker/.
