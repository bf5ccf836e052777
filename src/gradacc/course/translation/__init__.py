"""The Brazilian Portuguese edition: gettext catalogs of the English sources, and the edition written from them.

``units`` cuts a notebook or page into translatable units; ``catalogs`` keeps ``locale/pt_BR/LC_MESSAGES/*.po`` in
step with the English (msgmerge's rules); ``edition`` writes ``pt-BR/``, ``README.pt-BR.md`` and the compiled
``gradacc.mo``; ``review`` holds what the tests check; ``cli`` is ``gradacc translate``. ``locale/README.md`` is the
translators' guide. The package's own messages are translated at run time by ``gradacc.i18n``.
"""
