"""The values georep speaks in, with no I/O: a position in a log, topic names and the
naming rules, the one reading of a decimal in text, a share printed for a reader. Every
layer imports them; they import nothing of georep outside this package but
``georep.limits``."""
