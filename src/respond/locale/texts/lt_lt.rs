//! lt-LT.

use super::super::{FailureTexts, Forms, Texts, VisitorTexts};

pub(in crate::respond::locale) const TEXTS: Texts = Texts {
    heading: "Jūs esate eilėje",
    message: "Parduotuvėje dabar labai daug lankytojų. Neuždarykite šio skirtuko: būsite įleisti automatiškai, kai ateis jūsų eilė.",
    closed_heading: "Šis išpardavimas baigėsi",
    closed_message: "Nebėra ko laukti. Dėkojame už susidomėjimą.",
    challenge_heading: "Akimirką",
    challenge_message: "Prieš užimdami vietą eilėje, patikriname, ar esate žmogus. Paprastai tai vyksta savaime.",
    challenge_retry: "Patikrinti nepavyko. Netrukus bus bandoma iš naujo.",
    proof_message: "Prieš užimdami vietą eilėje, jūsų naršyklė atlieka nedidelį skaičiavimą, kuris sulaiko robotus. Tai trunka kelias sekundes.",
    proof_needs_script: "Ši eilė prašo jūsų naršyklės atlikti nedidelį skaičiavimą, kuris sulaiko robotus: įjunkite JavaScript (per HTTPS) ir iš naujo įkelkite puslapį, kad prisijungtumėte.",
    place_label: "Jūsų vieta eilėje",
    number_before: "Jūsų numeris",
    number_after: "eilėje",
    waiting: Forms::other("žmonių laukia")
        .one("žmogus laukia")
        .few("žmonės laukia"),
    total: Forms::other("Iš viso laukia {n} žmonių")
        .one("Iš viso laukia {n} žmogus")
        .few("Iš viso laukia {n} žmonės"),
    random_note: "Lankytojai įleidžiami atsitiktine tvarka, o ne atvykimo eile.",
    progress_label: "Pažanga iki eilės priekio",
    progress_value: "{pct}\u{a0}% kelio iki priekio",
    estimated_wait: "Numatomas laukimas",
    last_updated: "Atnaujinta",
    not_known: "Dar nežinoma",
    wait_note: "Kol kas negalime įvertinti jūsų laukimo. Įvertis pasirodys čia, kai tik eilė pajudės.",
    refresh_note: "Atnaujinę šį puslapį neprarasite savo vietos eilėje.",
    starts_in: "Prekyba prasidės po",
    prequeue_note: "Jūs esate eilėje. Ji pajudės, kai prasidės prekyba.",
    prequeue_shuffle_note: "Visi, prisijungę iki pradžios, pradžioje gaus atsitiktinę vietą: skubėti ar atnaujinti nereikia.",
    live: "Šis puslapis atsinaujina automatiškai",
    offline: "Ryšys nutrūko, bandoma iš naujo…",
    your_turn: "Jūsų eilė! Įleidžiame…",
    title_position: "Nr. {n} eilėje",
    footer: "Laukiamasis: {room}",
    minutes: Forms::other("{n} minučių")
        .one("{n} minutė")
        .few("{n} minutės"),
    range: "nuo {low} iki {high}",
    failure: FailureTexts {
        kicker: "Klaida {n}",
        retry: "Bandyti dar kartą",
        not_answering: "Parduotuvė šiuo metu neatsako",
        place_kept: "Bandykite dar kartą po akimirkos: jūsų vieta ar leidimas išsaugoti.",
        too_slow: "Parduotuvė atsako per ilgai",
        too_slow_message: "Parduotuvė neatsakė laiku. Bandykite dar kartą po akimirkos.",
        went_wrong: "Kažkas nepavyko",
        try_again: "Bandykite dar kartą po akimirkos.",
        bad_request: "Neteisinga užklausa",
        bad_request_message: "Užklausos nepavyko suprasti.",
        too_many_visitors: "Per daug lankytojų iš jūsų tinklo",
        too_fast: "Iš jūsų tinklo adreso per trumpą laiką atėjo daug naujų lankytojų.",
        too_many_live: "Jūsų tinklo adresas jau užima daug vietų eilėje.",
        too_many_requests: "Per daug užklausų su jūsų leidimu",
        pass_rate: "Jūsų leidimas per minutę paprašė daugiau puslapių, nei gali vienas žmogus.",
        retry_in: Forms::other("Puslapis bandys dar kartą po {n} sekundžių.")
            .one("Puslapis bandys dar kartą po {n} sekundės.")
            .few("Puslapis bandys dar kartą po {n} sekundžių."),
        shared: "Jūsų leidimas naudotas iš per daug vietų",
        shared_message: "Leidimas skirtas vienam žmogui. Šis buvo naudotas iš daugiau tinklų, nei vienas žmogus naudoja per seansą, todėl jis panaikintas visur. Iš naujo įkelkite puslapį, kad vėl stotumėte į eilę.",
        members_only: "Ši eilė skirta prisijungusiems klientams",
        members_only_message: "Prisijunkite prie parduotuvės, tada grįžkite čia per jos nuorodą ir užimkite vietą eilėje.",
        blocked: "Prieiga prie šio puslapio užblokuota",
        blocked_message: "Parduotuvė nepriima tokių užklausų. Jei manote, kad tai klaida, susisiekite su parduotuve.",
    },
};

pub(in crate::respond::locale) const VISITOR: VisitorTexts = VisitorTexts {
    queue_id: "Jūsų eilės ID",
    queue_id_note: "Nurodykite jį, jei kreipsitės į parduotuvės klientų aptarnavimą.",
    leave: "Palikti eilę",
    leave_confirm: "Jūsų vieta atiteks kitam žmogui. Jei vėl prisijungsite, pradėsite nuo eilės galo.",
    leave_yes: "Taip, palikti eilę",
    left_heading: "Palikote eilę",
    left_message: "Jūsų vieta atiteko kitam žmogui. Ačiū, kad užleidote vietą.",
    rejoin: "Vėl stoti į eilės galą",
    notify: "Praneškite, kai ateis mano eilė",
    notify_on: "Pranešime, kai ateis jūsų eilė, net jei būsite kitame skirtuke.",
    notify_title_only: "Ši naršyklė neleidžia pranešimų: kai ateis jūsų eilė, pasikeis skirtuko pavadinimas.",
    notify_sound: "Taip pat paleisti garsą",
    turn_title: "Atėjo jūsų eilė!",
    turn_body: "Grįžkite į šį skirtuką, kad įeitumėte.",
};
