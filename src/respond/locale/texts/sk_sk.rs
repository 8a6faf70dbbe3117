//! sk-SK.

use super::super::{FailureTexts, Forms, Texts, VisitorTexts};

pub(in crate::respond::locale) const TEXTS: Texts = Texts {
    heading: "Ste v rade",
    message: "V obchode je teraz veľký nával. Nechajte túto kartu otvorenú: keď na vás príde rad, vpustíme vás automaticky.",
    closed_heading: "Tento predaj sa skončil",
    closed_message: "Už nie je na čo čakať. Ďakujeme za váš záujem.",
    challenge_heading: "Okamih, prosím",
    challenge_message: "Skôr než zaujmete miesto v rade, overíme, že ste človek. Zvyčajne sa to stane samo.",
    challenge_retry: "Overenie sa nepodarilo. O chvíľu sa začne znova.",
    proof_message: "Skôr než zaujmete miesto v rade, váš prehliadač vykoná malý výpočet, ktorý zastaví botov. Trvá to niekoľko sekúnd.",
    proof_needs_script: "Tento rad žiada váš prehliadač o malý výpočet, ktorý zastaví botov: zapnite JavaScript (cez HTTPS) a znova načítajte stránku, aby ste sa zaradili.",
    place_label: "Vaše miesto v rade",
    number_before: "Ste číslo",
    number_after: "v rade",
    waiting: Forms::other("ľudí čaká")
        .one("človek čaká")
        .few("ľudia čakajú"),
    total: Forms::other("Celkovo čaká {n} ľudí")
        .one("Celkovo čaká {n} človek")
        .few("Celkovo čakajú {n} ľudia"),
    random_note: "Návštevníci vstupujú v náhodnom poradí, nie podľa príchodu.",
    progress_label: "Postup k začiatku radu",
    progress_value: "{pct}\u{a0}% cesty na začiatok",
    estimated_wait: "Odhadované čakanie",
    last_updated: "Naposledy aktualizované",
    not_known: "Zatiaľ neznáme",
    wait_note: "Vaše čakanie zatiaľ nevieme odhadnúť. Odhad sa tu zobrazí, hneď ako sa rad pohne.",
    refresh_note: "Obnovením tejto stránky o miesto v rade neprídete.",
    starts_in: "Predaj sa začne o",
    prequeue_note: "Ste v rade. Pohne sa, keď sa začne predaj.",
    prequeue_shuffle_note: "Každý, kto sa zaradí pred začiatkom, dostane pri štarte náhodné miesto: netreba sa ponáhľať ani obnovovať stránku.",
    live: "Táto stránka sa aktualizuje automaticky",
    offline: "Spojenie sa stratilo, skúšame znova…",
    your_turn: "Ste na rade! Vstupujete…",
    title_position: "Č.\u{a0}{n} v rade",
    footer: "Čakáreň: {room}",
    minutes: Forms::other("{n} minút")
        .one("{n} minúta")
        .few("{n} minúty"),
    range: "{low} až {high}",
    failure: FailureTexts {
        kicker: "Chyba {n}",
        retry: "Skúsiť znova",
        not_answering: "Obchod teraz neodpovedá",
        place_kept: "Skúste to o chvíľu znova: vaše miesto alebo priepustka zostávajú zachované.",
        too_slow: "Obchod odpovedá príliš dlho",
        too_slow_message: "Obchod neodpovedal včas. Skúste to o chvíľu znova.",
        went_wrong: "Niečo sa pokazilo",
        try_again: "Skúste to o chvíľu znova.",
        bad_request: "Chybná požiadavka",
        bad_request_message: "Požiadavke sa nepodarilo porozumieť.",
        too_many_visitors: "Príliš veľa návštevníkov z vašej siete",
        too_fast: "Z vašej sieťovej adresy prišlo za krátky čas veľa nových návštevníkov.",
        too_many_live: "Vaša sieťová adresa už drží veľa miest v rade.",
        too_many_requests: "Príliš veľa požiadaviek s vašou priepustkou",
        pass_rate: "Vaša priepustka si za minútu vyžiadala viac stránok, než zvládne jeden človek.",
        retry_in: Forms::other("Stránka to skúsi znova o {n} sekúnd.")
            .one("Stránka to skúsi znova o {n} sekundu.")
            .few("Stránka to skúsi znova o {n} sekundy."),
        shared: "Vaša priepustka bola použitá z príliš mnohých miest",
        shared_message: "Priepustka platí pre jedného človeka. Táto bola použitá z viacerých sietí, než jeden človek použije počas jednej relácie, a preto bola všade zrušená. Znova načítajte stránku a zaraďte sa do radu.",
        members_only: "Tento rad je pre prihlásených zákazníkov",
        members_only_message: "Prihláste sa do obchodu a potom sa sem vráťte cez jeho odkaz, aby ste zaujali miesto v rade.",
        blocked: "Prístup na túto stránku je zablokovaný",
        blocked_message: "Obchod takéto požiadavky neprijíma. Ak si myslíte, že ide o chybu, kontaktujte obchod.",
    },
};

pub(in crate::respond::locale) const VISITOR: VisitorTexts = VisitorTexts {
    queue_id: "Vaše ID v rade",
    queue_id_note: "Uveďte ho, ak kontaktujete zákaznícku podporu obchodu.",
    leave: "Opustiť rad",
    leave_confirm: "Vaše miesto pripadne ďalšej osobe. Ak sa zaradíte znova, začnete na konci.",
    leave_yes: "Áno, opustiť rad",
    left_heading: "Opustili ste rad",
    left_message: "Vaše miesto pripadlo ďalšej osobe. Ďakujeme, že ste uvoľnili miesto.",
    rejoin: "Znova sa zaradiť na koniec radu",
    notify: "Upozorniť ma, keď budem na rade",
    notify_on: "Dáme vám vedieť, keď budete na rade, aj keď budete na inej karte.",
    notify_title_only: "Tento prehliadač nepovoľuje upozornenia: keď budete na rade, zmení sa názov karty.",
    notify_sound: "Prehrať aj zvuk",
    turn_title: "Ste na rade!",
    turn_body: "Vráťte sa na túto kartu a vstúpte.",
};
