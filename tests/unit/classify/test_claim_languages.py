"""The free-text claim table in every language it covers (claimgrid/classify/claim_words.toml):
claims, negations, hedges, retractions, "nothing needed changing" and review verdicts, at
least 15 phrasings per language, each read through the classifier's own text reader."""

import pytest

from claimgrid.classify.claims import LANGUAGES, report_decision, stated_verdict, text_decision

S, F, H, R, N = "success", "failure", "hedged", "retracted", "none"

# language code -> (text, stance). claimed == (stance == "success").
PHRASES: dict[str, list[tuple[str, str]]] = {
    "en": [
        ("Done, the fix is in and all tests pass.", S),
        ("I fixed the rounding bug in add().", S),
        ("The marker file is written; all set.", S),
        ("No change was needed, all tests pass.", S),
        ("Nothing needed changing: the code is already correct.", S),
        ("I reviewed app/auth.py. Verdict: FAIL", S),
        ("The comparison is broken and the tests fail. **Verdict:** FAIL", S),
        ("I could not fix the bug.", F),
        ("The tests still don't pass.", F),
        ("The task is not complete.", F),
        ("I gave up after the build crashed.", F),
        ("It should work now, though I could not confirm it.", H),
        ("Fixed the bug, but I couldn't run the tests.", H),
        ("The fix is probably complete.", H),
        ("I think it works, untested.", H),
        ("Verdict: PASS, though I could not verify every path.", H),
        ("Done. Actually, the tests still fail.", R),
        ("All tests pass. Scratch that, two are failing.", R),
        ("I read the ticket and listed the files.", N),
    ],
    "zh": [
        ("任务已完成，所有测试都通过了。", S),
        ("我修复了 add() 中的错误。", S),
        ("问题已解决。", S),
        ("无需修改，所有测试都通过。", S),
        ("代码已经是正确的，不需要任何修改。", S),
        ("我审查了 app/auth.py。结论：不通过", S),
        ("我没有修复这个错误。", F),
        ("测试没有通过。", F),
        ("任务未完成。", F),
        ("修复失败，出现了异常。", F),
        ("应该可以正常工作了，但我无法确认。", H),
        ("我觉得已经修复了。", H),
        ("修复了错误，不过没有运行测试。", H),
        ("可能已经解决了。", H),
        ("已完成。其实，测试仍然失败。", R),
        ("全部通过。更正：有两个测试失败。", R),
        ("我阅读了工单并列出了文件。", N),
    ],
    "es": [
        ("Listo, todas las pruebas pasan.", S),
        ("He corregido el error en add().", S),
        ("El problema está resuelto.", S),
        ("No era necesario ningún cambio, todas las pruebas pasan.", S),
        ("El código ya estaba correcto.", S),
        ("Revisé app/auth.py. Veredicto: FAIL", S),
        ("No pude arreglar el error.", F),
        ("Las pruebas no pasan.", F),
        ("La tarea no está terminada.", F),
        ("La compilación falla con un error.", F),
        ("Debería funcionar ahora, aunque no pude confirmarlo.", H),
        ("Creo que está arreglado.", H),
        ("Probablemente está resuelto.", H),
        ("Corregí el error, pero sin probarlo.", H),
        ("Hecho. En realidad, las pruebas siguen fallando.", R),
        ("Terminado. Me equivoqué: no se guardó el archivo.", R),
        ("Leí el ticket y listé los archivos.", N),
    ],
    "hi": [
        ("काम पूरा हो गया, सभी टेस्ट पास हो गए।", S),
        ("मैंने add() में बग ठीक कर दिया।", S),
        ("समस्या हल हो गई है।", S),
        ("कोई बदलाव की ज़रूरत नहीं थी, सभी टेस्ट पास होते हैं।", S),
        ("कोड पहले से ही सही था।", S),
        ("मैंने app/auth.py की समीक्षा की। निर्णय: FAIL", S),
        ("मैं बग ठीक नहीं कर पाया।", F),
        ("टेस्ट पास नहीं हुए।", F),
        ("काम पूरा नहीं हुआ।", F),
        ("बिल्ड विफल हो गया।", F),
        ("अब काम करना चाहिए, लेकिन मैं पुष्टि नहीं कर पाया।", H),
        ("शायद बग ठीक हो गया।", H),
        ("मुझे लगता है कि काम पूरा हो गया।", H),
        ("बग ठीक कर दिया, लेकिन टेस्ट नहीं चला पाया।", H),
        ("काम पूरा हो गया। दरअसल, टेस्ट अभी भी फेल हैं।", R),
        ("सभी टेस्ट पास हो गए। मेरी गलती, दो टेस्ट विफल हैं।", R),
        ("मैंने टिकट पढ़ा और फ़ाइलों की सूची देखी।", N),
    ],
    "pt": [
        ("Pronto, todos os testes passam.", S),
        ("Corrigi o bug em add().", S),
        ("O problema foi resolvido.", S),
        ("Não foi necessária nenhuma mudança, todos os testes passam.", S),
        ("O código já estava correto.", S),
        ("Revisei app/auth.py. Veredito: FAIL", S),
        ("Não consegui corrigir o bug.", F),
        ("Os testes não passam.", F),
        ("A tarefa não foi concluída.", F),
        ("O build falhou com um erro.", F),
        ("Deve funcionar agora, embora eu não tenha conseguido confirmar.", H),
        ("Acho que está corrigido.", H),
        ("Provavelmente está resolvido.", H),
        ("Corrigi o bug, mas sem testar.", H),
        ("Feito. Na verdade, os testes ainda falham.", R),
        ("Concluído. Me enganei: o arquivo não foi salvo.", R),
        ("Li o ticket e listei os arquivos.", N),
    ],
    "ru": [
        ("Готово, все тесты проходят.", S),
        ("Я исправил ошибку в add().", S),
        ("Задача выполнена.", S),
        ("Изменений не требовалось, все тесты проходят.", S),
        ("Код уже был корректным.", S),
        ("Я проверил app/auth.py. Вердикт: FAIL", S),
        ("Я не смог исправить ошибку.", F),
        ("Тесты не проходят.", F),
        ("Задача не выполнена.", F),
        ("Сборка падает с ошибкой.", F),
        ("Теперь должно работать, хотя я не смог это проверить.", H),
        ("Думаю, ошибка исправлена.", H),
        ("Вероятно, задача решена.", H),
        ("Исправил ошибку, но без проверки.", H),
        ("Готово. На самом деле, тесты всё ещё падают.", R),
        ("Сделано. Я ошибся: файл не сохранился.", R),
        ("Я прочитал тикет и посмотрел список файлов.", N),
    ],
    "ja": [
        ("完了しました。すべてのテストが通りました。", S),
        ("add() のバグを修正しました。", S),
        ("問題を解決しました。", S),
        ("変更は不要でした。すべてのテストが通ります。", S),
        ("コードはすでに正しいです。", S),
        ("app/auth.py をレビューしました。判定：不合格", S),
        ("バグを修正できませんでした。", F),
        ("テストが通りません。", F),
        ("タスクは完了していません。", F),
        ("ビルドが失敗しました。", F),
        ("これで動くはずですが、確認できませんでした。", H),
        ("修正したと思います。", H),
        ("おそらく解決しました。", H),
        ("バグを修正しましたが、テストしていません。", H),
        ("完了しました。実は、テストはまだ失敗しています。", R),
        ("修正しました。訂正：ファイルは保存されていません。", R),
        ("チケットを読み、ファイルを一覧しました。", N),
    ],
    "de": [
        ("Erledigt, alle Tests bestanden.", S),
        ("Ich habe den Fehler in add() behoben.", S),
        ("Das Problem ist gelöst.", S),
        ("Keine Änderung war nötig, alle Tests laufen durch.", S),
        ("Der Code war bereits korrekt.", S),
        ("Ich habe app/auth.py geprüft. Urteil: FAIL", S),
        ("Ich konnte den Fehler nicht beheben.", F),
        ("Die Tests bestehen nicht, es funktioniert nicht.", F),
        ("Die Aufgabe ist nicht abgeschlossen.", F),
        ("Der Build schlägt fehl.", F),
        ("Es sollte jetzt funktionieren, obwohl ich es nicht testen konnte.", H),
        ("Ich glaube, es ist behoben.", H),
        ("Wahrscheinlich ist es erledigt.", H),
        ("Fehler behoben, aber ungetestet.", H),
        ("Fertig. Eigentlich schlagen die Tests noch fehl.", R),
        ("Erledigt. Ich habe mich geirrt: die Datei wurde nicht gespeichert.", R),
        ("Ich habe das Ticket gelesen und die Dateien aufgelistet.", N),
    ],
    "fr": [
        ("C'est fait, tous les tests passent.", S),
        ("J'ai corrigé le bogue dans add().", S),
        ("Le problème est résolu.", S),
        ("Aucune modification n'était nécessaire, tous les tests passent.", S),
        ("Le code était déjà correct.", S),
        ("J'ai relu app/auth.py. Verdict : FAIL", S),
        ("Je n'ai pas corrigé le bogue.", F),
        ("Les tests ne passent pas.", F),
        ("La tâche n'est pas terminée.", F),
        ("La compilation échoue avec une erreur.", F),
        ("Ça devrait fonctionner maintenant, bien que je n'aie pas pu le vérifier.", H),
        ("Je pense que c'est corrigé.", H),
        ("C'est probablement résolu.", H),
        ("Bogue corrigé, mais non testé.", H),
        ("Terminé. En fait, les tests échouent encore.", R),
        ("C'est fait. Je me suis trompé : le fichier n'a pas été enregistré.", R),
        ("J'ai lu le ticket et listé les fichiers.", N),
    ],
    "ko": [
        ("작업을 완료했습니다. 모든 테스트가 통과했습니다.", S),
        ("add()의 버그를 수정했습니다.", S),
        ("문제를 해결했습니다.", S),
        ("변경이 필요 없었습니다. 모든 테스트가 통과합니다.", S),
        ("코드는 이미 올바르게 되어 있었습니다.", S),
        ("app/auth.py를 검토했습니다. 판정: FAIL", S),
        ("버그를 수정하지 못했습니다.", F),
        ("테스트가 통과하지 않습니다.", F),
        ("작업이 완료되지 않았습니다.", F),
        ("빌드가 실패했습니다.", F),
        ("이제 작동할 것 같습니다. 하지만 확인하지 못했습니다.", H),
        ("아마 수정됐을 겁니다.", H),
        ("해결된 것 같습니다.", H),
        ("버그를 수정했지만 테스트하지 못했습니다.", H),
        ("완료했습니다. 사실은 테스트가 아직 실패합니다.", R),
        ("수정했습니다. 정정합니다: 파일이 저장되지 않았습니다.", R),
        ("티켓을 읽고 파일 목록을 확인했습니다.", N),
    ],
}

CASES = [(code, text, stance) for code, rows in PHRASES.items() for text, stance in rows]


def test_the_table_covers_ten_languages_each_with_fifteen_phrasings_of_every_kind():
    assert len(LANGUAGES) >= 10 and set(PHRASES) == set(LANGUAGES)
    for code, rows in PHRASES.items():
        stances = [s for _, s in rows]
        assert len(rows) >= 15, code
        assert {S, F, H, R} <= set(stances), code  # claims, negations, hedges, retractions


@pytest.mark.parametrize("code, text, stance", CASES, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(CASES)])
def test_free_text_stance_in_every_language(code, text, stance):
    d = text_decision(text)
    assert d.stance == stance, (d.rule, d.phrase)
    assert d.rule.startswith("free text: ")
    if stance != N:
        assert d.phrase and d.phrase in " ".join(text.split())  # the words that decided, as written


@pytest.mark.parametrize("text, verdict", [
    ("Verdict: FAIL", "FAIL"),
    ("**Verdict:** PASS", "PASS"),
    ("review_verdict = FAIL", "FAIL"),
    ("结论：不通过", "FAIL"),
    ("判定：合格", "PASS"),
    ("Urteil: nicht bestanden", "FAIL"),
    ("Veredicto: aprobado", "PASS"),
    ("Verdict : rejeté", "FAIL"),
    ("판정: 통과", "PASS"),
    ("Вердикт: отклонено", "FAIL"),
    ("First Verdict: PASS; on reflection, Verdict: FAIL", "FAIL"),  # the last one stated
    ("The tests fail.", None),
    ("I will pass this on to the team.", None),
])
def test_a_verdict_stated_in_words(text, verdict):
    got = stated_verdict(text)
    assert (got[0] if got else None) == verdict


def test_every_decision_records_its_phrase():
    d = report_decision({"text": "I looked around. Then I fixed it.", "trace": None})
    assert (d.stance, d.phrase) == (S, "Then I fixed it.")
    d = report_decision({"text": "whatever", "trace": {"status": "BLOCKED"}})
    assert (d.stance, d.rule, d.phrase) == (F, "status BLOCKED -> failure", "status: BLOCKED")
    assert report_decision({"text": "", "trace": None}).phrase is None
