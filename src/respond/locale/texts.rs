//! The built-in pages' texts, one file per language (an operator's own `[page]` texts and a
//! custom template replace them): the pages' texts (`Texts`), and the waiting page's queue id,
//! leave button, page after leaving and notice of the visitor's turn (`VisitorTexts`).

use super::{Texts, VisitorTexts};
use crate::language::Locale;

mod ar_eg;
mod bg_bg;
mod cs_cz;
mod da_dk;
mod de_de;
mod el_gr;
mod en_us;
mod es_es;
mod fa_ir;
mod fi_fi;
mod fr_fr;
mod he_il;
mod hi_in;
mod hr_hr;
mod hu_hu;
mod id_id;
mod it_it;
mod ja_jp;
mod ko_kr;
mod lt_lt;
mod ms_my;
mod nb_no;
mod nl_nl;
mod pl_pl;
mod pt_br;
mod ro_ro;
mod ru_ru;
mod sk_sk;
mod sl_si;
mod sr_ba;
mod sv_se;
mod th_th;
mod tl_ph;
mod tr_tr;
mod uk_ua;
mod vi_vn;
mod zh_cn;
mod zh_tw;

pub(super) fn texts(locale: Locale) -> &'static Texts {
    match locale {
        Locale::EnUs => &en_us::TEXTS,
        Locale::EsEs => &es_es::TEXTS,
        Locale::DeDe => &de_de::TEXTS,
        Locale::FrFr => &fr_fr::TEXTS,
        Locale::ItIt => &it_it::TEXTS,
        Locale::JaJp => &ja_jp::TEXTS,
        Locale::KoKr => &ko_kr::TEXTS,
        Locale::PtBr => &pt_br::TEXTS,
        Locale::ZhCn => &zh_cn::TEXTS,
        Locale::ZhTw => &zh_tw::TEXTS,
        Locale::NlNl => &nl_nl::TEXTS,
        Locale::PlPl => &pl_pl::TEXTS,
        Locale::IdId => &id_id::TEXTS,
        Locale::TrTr => &tr_tr::TEXTS,
        Locale::ArEg => &ar_eg::TEXTS,
        Locale::RuRu => &ru_ru::TEXTS,
        Locale::FaIr => &fa_ir::TEXTS,
        Locale::BgBg => &bg_bg::TEXTS,
        Locale::HrHr => &hr_hr::TEXTS,
        Locale::CsCz => &cs_cz::TEXTS,
        Locale::DaDk => &da_dk::TEXTS,
        Locale::FiFi => &fi_fi::TEXTS,
        Locale::LtLt => &lt_lt::TEXTS,
        Locale::MsMy => &ms_my::TEXTS,
        Locale::NbNo => &nb_no::TEXTS,
        Locale::RoRo => &ro_ro::TEXTS,
        Locale::ElGr => &el_gr::TEXTS,
        Locale::HeIl => &he_il::TEXTS,
        Locale::HiIn => &hi_in::TEXTS,
        Locale::HuHu => &hu_hu::TEXTS,
        Locale::SrBa => &sr_ba::TEXTS,
        Locale::SkSk => &sk_sk::TEXTS,
        Locale::SlSi => &sl_si::TEXTS,
        Locale::SvSe => &sv_se::TEXTS,
        Locale::TlPh => &tl_ph::TEXTS,
        Locale::ThTh => &th_th::TEXTS,
        Locale::UkUa => &uk_ua::TEXTS,
        Locale::ViVn => &vi_vn::TEXTS,
    }
}

pub(super) fn visitor(locale: Locale) -> &'static VisitorTexts {
    match locale {
        Locale::EnUs => &en_us::VISITOR,
        Locale::EsEs => &es_es::VISITOR,
        Locale::DeDe => &de_de::VISITOR,
        Locale::FrFr => &fr_fr::VISITOR,
        Locale::ItIt => &it_it::VISITOR,
        Locale::JaJp => &ja_jp::VISITOR,
        Locale::KoKr => &ko_kr::VISITOR,
        Locale::PtBr => &pt_br::VISITOR,
        Locale::ZhCn => &zh_cn::VISITOR,
        Locale::ZhTw => &zh_tw::VISITOR,
        Locale::NlNl => &nl_nl::VISITOR,
        Locale::PlPl => &pl_pl::VISITOR,
        Locale::IdId => &id_id::VISITOR,
        Locale::TrTr => &tr_tr::VISITOR,
        Locale::ArEg => &ar_eg::VISITOR,
        Locale::RuRu => &ru_ru::VISITOR,
        Locale::FaIr => &fa_ir::VISITOR,
        Locale::BgBg => &bg_bg::VISITOR,
        Locale::HrHr => &hr_hr::VISITOR,
        Locale::CsCz => &cs_cz::VISITOR,
        Locale::DaDk => &da_dk::VISITOR,
        Locale::FiFi => &fi_fi::VISITOR,
        Locale::LtLt => &lt_lt::VISITOR,
        Locale::MsMy => &ms_my::VISITOR,
        Locale::NbNo => &nb_no::VISITOR,
        Locale::RoRo => &ro_ro::VISITOR,
        Locale::ElGr => &el_gr::VISITOR,
        Locale::HeIl => &he_il::VISITOR,
        Locale::HiIn => &hi_in::VISITOR,
        Locale::HuHu => &hu_hu::VISITOR,
        Locale::SrBa => &sr_ba::VISITOR,
        Locale::SkSk => &sk_sk::VISITOR,
        Locale::SlSi => &sl_si::VISITOR,
        Locale::SvSe => &sv_se::VISITOR,
        Locale::TlPh => &tl_ph::VISITOR,
        Locale::ThTh => &th_th::VISITOR,
        Locale::UkUa => &uk_ua::VISITOR,
        Locale::ViVn => &vi_vn::VISITOR,
    }
}
