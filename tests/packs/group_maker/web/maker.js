// group_maker's front end: served by the host under /extensions/group_maker/.
