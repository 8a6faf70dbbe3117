//! pl-PL.

use super::super::{FailureTexts, Forms, Texts, VisitorTexts};

pub(in crate::respond::locale) const TEXTS: Texts = Texts {
    heading: "Jesteś w kolejce",
    message: "W sklepie jest teraz bardzo duży ruch. Nie zamykaj tej karty: wejdziesz automatycznie, gdy nadejdzie Twoja kolej.",
    closed_heading: "Ta sprzedaż została zakończona",
    closed_message: "Nie ma już na co czekać. Dziękujemy za zainteresowanie.",
    challenge_heading: "Chwileczkę",
    challenge_message: "Zanim zajmiesz miejsce w kolejce, sprawdzamy, czy jesteś człowiekiem. Zwykle dzieje się to samo.",
    challenge_retry: "Weryfikacja się nie powiodła. Za chwilę zacznie się od nowa.",
    proof_message: "Zanim zajmiesz miejsce w kolejce, Twoja przeglądarka wykona małe obliczenie, które zatrzymuje boty. To potrwa kilka sekund.",
    proof_needs_script: "Ta kolejka prosi przeglądarkę o małe obliczenie, które zatrzymuje boty: włącz JavaScript (przez HTTPS) i odśwież stronę, aby dołączyć.",
    place_label: "Twoje miejsce w kolejce",
    number_before: "Jesteś numerem",
    number_after: "w kolejce",
    waiting: Forms::other("osoby czekają")
        .one("osoba czeka")
        .few("osoby czekają")
        .many("osób czeka"),
    total: Forms::other("Łącznie czeka {n} osoby")
        .one("Łącznie czeka {n} osoba")
        .few("Łącznie czekają {n} osoby")
        .many("Łącznie czeka {n} osób"),
    random_note: "Odwiedzający wchodzą w losowej kolejności, nie według kolejności przybycia.",
    progress_label: "Postęp do początku kolejki",
    progress_value: "{pct}% drogi na początek",
    estimated_wait: "Szacowany czas oczekiwania",
    last_updated: "Ostatnia aktualizacja",
    not_known: "Jeszcze nieznany",
    wait_note: "Nie możemy jeszcze oszacować czasu oczekiwania. Szacunek pojawi się tutaj, gdy kolejka zacznie się przesuwać.",
    refresh_note: "Odświeżenie tej strony nie spowoduje utraty miejsca w kolejce.",
    starts_in: "Sprzedaż rusza za",
    prequeue_note: "Jesteś w kolejce. Zacznie się przesuwać, gdy ruszy sprzedaż.",
    prequeue_shuffle_note: "Każdy, kto dołączy przed startem, dostanie na starcie losowe miejsce: nie trzeba się spieszyć ani odświeżać.",
    live: "Ta strona aktualizuje się automatycznie",
    offline: "Utracono połączenie, ponawianie…",
    your_turn: "Twoja kolej! Wpuszczamy Cię…",
    title_position: "Nr {n} w kolejce",
    footer: "Poczekalnia: {room}",
    minutes: Forms::other("{n} minuty")
        .one("{n} minuta")
        .few("{n} minuty")
        .many("{n} minut"),
    range: "od {low} do {high}",
    failure: FailureTexts {
        kicker: "Błąd {n}",
        retry: "Spróbuj ponownie",
        not_answering: "Sklep w tej chwili nie odpowiada",
        place_kept: "Spróbuj ponownie za chwilę: Twoje miejsce lub przepustka są zachowane.",
        too_slow: "Sklep odpowiada zbyt długo",
        too_slow_message: "Sklep nie odpowiedział na czas. Spróbuj ponownie za chwilę.",
        went_wrong: "Coś poszło nie tak",
        try_again: "Spróbuj ponownie za chwilę.",
        bad_request: "Nieprawidłowe żądanie",
        bad_request_message: "Nie udało się zrozumieć żądania.",
        too_many_visitors: "Zbyt wielu odwiedzających z Twojej sieci",
        too_fast: "Z Twojego adresu sieciowego w krótkim czasie przyszło wielu nowych odwiedzających.",
        too_many_live: "Twój adres sieciowy zajmuje już wiele miejsc w kolejce.",
        too_many_requests: "Zbyt wiele żądań z Twoją przepustką",
        pass_rate: "Twoja przepustka zażądała w ciągu minuty więcej stron, niż może przejrzeć jedna osoba.",
        retry_in: Forms::other("Ta strona spróbuje ponownie za {n} sekundy.")
            .one("Ta strona spróbuje ponownie za {n} sekundę.")
            .few("Ta strona spróbuje ponownie za {n} sekundy.")
            .many("Ta strona spróbuje ponownie za {n} sekund."),
        shared: "Twoja przepustka była używana w zbyt wielu miejscach",
        shared_message: "Przepustka jest dla jednej osoby. Ta była używana w większej liczbie sieci, niż jedna osoba używa w jednej sesji, więc została wszędzie unieważniona. Odśwież stronę, aby ponownie dołączyć do kolejki.",
        members_only: "Ta kolejka jest dla zalogowanych klientów",
        members_only_message: "Zaloguj się w sklepie, a potem wróć tu przez jego link, aby zająć miejsce w kolejce.",
        blocked: "Dostęp do tej strony jest zablokowany",
        blocked_message: "Sklep nie przyjmuje takich żądań. Jeśli uważasz, że to pomyłka, skontaktuj się ze sklepem.",
    },
};

pub(in crate::respond::locale) const VISITOR: VisitorTexts = VisitorTexts {
    queue_id: "Twój identyfikator w kolejce",
    queue_id_note: "Podaj go, jeśli kontaktujesz się z obsługą klienta sklepu.",
    leave: "Opuść kolejkę",
    leave_confirm: "Twoje miejsce przejdzie na następną osobę. Jeśli dołączysz ponownie, zaczniesz od końca.",
    leave_yes: "Tak, opuść kolejkę",
    left_heading: "Opuściłeś kolejkę",
    left_message: "Twoje miejsce przeszło na następną osobę. Dziękujemy za zrobienie miejsca.",
    rejoin: "Dołącz ponownie na końcu kolejki",
    notify: "Powiadom mnie, gdy nadejdzie moja kolej",
    notify_on: "Powiadomimy Cię, gdy nadejdzie Twoja kolej, nawet jeśli będziesz w innej karcie.",
    notify_title_only: "Ta przeglądarka nie zezwala na powiadomienia: tytuł karty zmieni się, gdy nadejdzie Twoja kolej.",
    notify_sound: "Odtwórz też dźwięk",
    turn_title: "Twoja kolej!",
    turn_body: "Wróć do tej karty, aby wejść.",
};
