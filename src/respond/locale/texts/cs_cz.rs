//! cs-CZ.

use super::super::{FailureTexts, Forms, Texts, VisitorTexts};

pub(in crate::respond::locale) const TEXTS: Texts = Texts {
    heading: "Jste ve frontě",
    message: "V obchodě je teď velký nával. Nechte tuto kartu otevřenou: až na vás přijde řada, budete vpuštěni automaticky.",
    closed_heading: "Tento prodej skončil",
    closed_message: "Už není na co čekat. Děkujeme za váš zájem.",
    challenge_heading: "Okamžik, prosím",
    challenge_message: "Než zaujmete místo ve frontě, ověříme, že jste člověk. Obvykle se to stane samo.",
    challenge_retry: "Ověření se nezdařilo. Za chvíli začne znovu.",
    proof_message: "Než zaujmete místo ve frontě, váš prohlížeč provede malý výpočet, který zastaví boty. Trvá to několik sekund.",
    proof_needs_script: "Tato fronta žádá váš prohlížeč o malý výpočet, který zastaví boty: zapněte JavaScript (přes HTTPS) a znovu načtěte stránku, abyste se zařadili.",
    place_label: "Vaše místo ve frontě",
    number_before: "Jste číslo",
    number_after: "ve frontě",
    waiting: Forms::other("lidí čeká")
        .one("člověk čeká")
        .few("lidé čekají"),
    total: Forms::other("Celkem čeká {n} lidí")
        .one("Celkem čeká {n} člověk")
        .few("Celkem čekají {n} lidé"),
    random_note: "Návštěvníci vstupují v náhodném pořadí, ne podle příchodu.",
    progress_label: "Postup k začátku fronty",
    progress_value: "{pct}\u{a0}% cesty na začátek",
    estimated_wait: "Odhadované čekání",
    last_updated: "Naposledy aktualizováno",
    not_known: "Zatím neznámé",
    wait_note: "Vaše čekání zatím nedokážeme odhadnout. Odhad se tu objeví, jakmile se fronta pohne.",
    refresh_note: "Obnovením této stránky o místo ve frontě nepřijdete.",
    starts_in: "Prodej začne za",
    prequeue_note: "Jste ve frontě. Pohne se, až začne prodej.",
    prequeue_shuffle_note: "Každý, kdo se zařadí před začátkem, dostane při startu náhodné místo: není třeba spěchat ani obnovovat stránku.",
    live: "Tato stránka se aktualizuje automaticky",
    offline: "Spojení ztraceno, zkoušíme znovu…",
    your_turn: "Jste na řadě! Vstupujete…",
    title_position: "Č.\u{a0}{n} ve frontě",
    footer: "Čekárna: {room}",
    minutes: Forms::other("{n} minut")
        .one("{n} minuta")
        .few("{n} minuty"),
    range: "{low} až {high}",
    failure: FailureTexts {
        kicker: "Chyba {n}",
        retry: "Zkusit znovu",
        not_answering: "Obchod teď neodpovídá",
        place_kept: "Zkuste to za chvíli znovu: vaše místo nebo propustka zůstávají zachovány.",
        too_slow: "Obchod odpovídá příliš dlouho",
        too_slow_message: "Obchod neodpověděl včas. Zkuste to za chvíli znovu.",
        went_wrong: "Něco se pokazilo",
        try_again: "Zkuste to za chvíli znovu.",
        bad_request: "Chybný požadavek",
        bad_request_message: "Požadavku se nepodařilo porozumět.",
        too_many_visitors: "Příliš mnoho návštěvníků z vaší sítě",
        too_fast: "Z vaší síťové adresy přišlo za krátkou dobu mnoho nových návštěvníků.",
        too_many_live: "Vaše síťová adresa už drží mnoho míst ve frontě.",
        too_many_requests: "Příliš mnoho požadavků s vaší propustkou",
        pass_rate: "Vaše propustka si za minutu vyžádala více stránek, než zvládne jeden člověk.",
        retry_in: Forms::other("Stránka to zkusí znovu za {n} sekund.")
            .one("Stránka to zkusí znovu za {n} sekundu.")
            .few("Stránka to zkusí znovu za {n} sekundy."),
        shared: "Vaše propustka byla použita z příliš mnoha míst",
        shared_message: "Propustka platí pro jednoho člověka. Tato byla použita z více sítí, než jeden člověk použije za jednu relaci, a proto byla všude ukončena. Znovu načtěte stránku a zařaďte se do fronty.",
        members_only: "Tato fronta je pro přihlášené zákazníky",
        members_only_message: "Přihlaste se do obchodu a pak se vraťte sem přes jeho odkaz, abyste zaujali místo ve frontě.",
        blocked: "Přístup na tuto stránku je zablokován",
        blocked_message: "Obchod takové požadavky nepřijímá. Pokud si myslíte, že jde o chybu, kontaktujte obchod.",
    },
};

pub(in crate::respond::locale) const VISITOR: VisitorTexts = VisitorTexts {
    queue_id: "Vaše ID ve frontě",
    queue_id_note: "Uveďte ho, pokud kontaktujete zákaznickou podporu obchodu.",
    leave: "Opustit frontu",
    leave_confirm: "Vaše místo připadne další osobě. Pokud se zařadíte znovu, začnete na konci.",
    leave_yes: "Ano, opustit frontu",
    left_heading: "Opustili jste frontu",
    left_message: "Vaše místo připadlo další osobě. Děkujeme, že jste uvolnili místo.",
    rejoin: "Znovu se zařadit na konec fronty",
    notify: "Upozornit mě, až budu na řadě",
    notify_on: "Dáme vám vědět, až budete na řadě, i když budete v jiné kartě.",
    notify_title_only: "Tento prohlížeč nepovoluje oznámení: až budete na řadě, změní se název karty.",
    notify_sound: "Přehrát i zvuk",
    turn_title: "Jste na řadě!",
    turn_body: "Vraťte se na tuto kartu a vstupte.",
};
