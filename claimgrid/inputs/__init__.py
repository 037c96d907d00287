"""What a grid is made from, loaded and validated: tasks (``tasks``), content and swap
conditions (``conditions``), framework entries and their locked venvs (``venvs``), and the
strict data-model base they share (``schema``). Every problem is one line naming the file
and the field."""
